import { patchModuleFiles, type ModuleFilePatch } from '../hooks/index.js';
import { Installs, type Installed } from '../install/index.js';
import { DeadlinePolicy, type DeadlinePolicyOptions } from '../policy/index.js';

/**
 * The install state one driver's wrappers read. A wrapper stays in the driver's method chain when
 * something wrapped it again after lifeline (OpenTelemetry's instrumentation, say) and cannot be
 * taken out: it reads `policy` on every call and passes straight through once it is `undefined`.
 * The latest install is in force ({@link Installs}).
 */
export class DriverInstall {
  /** The policy of the install in force; `undefined` when none is. */
  policy: DeadlinePolicy | undefined;
  readonly #installs = new Installs<{ readonly policy: DeadlinePolicy; readonly patches: readonly ModuleFilePatch[] }>(
    ({ policy, patches }) => {
      this.policy = policy;
      const modules = patchModuleFiles(patches);
      return () => {
        this.policy = undefined;
        modules.uninstall();
      };
    },
  );

  /** Validates `options` (a bad policy throws before anything is patched), then applies `patches`. */
  install(options: DeadlinePolicyOptions, patches: readonly ModuleFilePatch[]): Installed {
    return this.#installs.add({ policy: new DeadlinePolicy(options), patches });
  }
}
