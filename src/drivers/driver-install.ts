import { patchModuleFiles, type ModuleFilePatch, type PatchedModules } from '../hooks/index.js';
import { DeadlinePolicy, type DeadlinePolicyOptions } from '../policy/index.js';

/** One driver's installed deadlines, and the way back. */
export interface InstalledDriver {
  /** Stops bounding new calls; calls already bounded keep their deadline. Idempotent. */
  uninstall(): void;
}

/**
 * The install state one driver's wrappers read. A wrapper stays in the driver's method chain when
 * something wrapped it again after lifeline (OpenTelemetry's instrumentation, say) and cannot be
 * taken out: it reads `policy` on every call and passes straight through once it is `undefined`.
 * A second install replaces the first.
 */
export class DriverInstall {
  /** The policy of the install in force; `undefined` when none is. */
  policy: DeadlinePolicy | undefined;
  #patched: PatchedModules | undefined;

  /** Validates `options` (a bad policy throws before anything is patched), then applies `patches`. */
  install(options: DeadlinePolicyOptions, patches: readonly ModuleFilePatch[]): InstalledDriver {
    const policy = new DeadlinePolicy(options);
    this.#patched?.uninstall();
    this.policy = policy;
    const modules = patchModuleFiles(patches);
    this.#patched = modules;
    return {
      uninstall: () => {
        if (this.#patched !== modules) return;
        this.#patched = undefined;
        this.policy = undefined;
        modules.uninstall();
      },
    };
  }
}
