import { diag } from '@opentelemetry/api';
import { registerInstrumentations, type Instrumentation } from '@opentelemetry/instrumentation';
import { readFileSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { createRequire } from 'node:module';
import { whenFirstResolved } from '../hooks/index.js';
import { dirname } from 'node:path';
import { compileFunction } from 'node:vm';
import { INSTRUMENTATION_TARGETS } from './instrumentation-targets.js';

/**
 * The auto-instrumentations package, loaded so that an instrumentation of a library the app never
 * loads costs nothing: its package `require`s all ~40 instrumentation packages and every cloud
 * resource detector at import (~200 ms and ~35 MB here), though a service loads a handful of the
 * libraries they patch. Its own code still decides which instrumentations are on and with what
 * configuration (`OTEL_NODE_ENABLED_INSTRUMENTATIONS`, its defaults, the configs lifeline passes);
 * only the construction waits. An instrumentation of Node's own modules, or of modules the table
 * below does not know, is made at once, as before.
 */
export interface AutoInstrumentations {
  /** Made now, for the SDK to enable: Node's modules (http, net, dns…), undici, and any not in the table. */
  readonly now: Instrumentation[];
  /** Made when the app first resolves a module they patch. */
  readonly deferred: DeferredInstrumentations;
}

interface Wanted {
  readonly pkg: string;
  readonly exportName: string;
  readonly config: unknown;
}

const INSTRUMENTATION = /^@opentelemetry\/instrumentation-/;
/** Only read by the package's resource-detector function, which lifeline never calls (it has its own). */
const DETECTORS = /^@opentelemetry\/(resource-detector-|resources$)/;

/**
 * Runs the package's `getNodeAutoInstrumentations(configs)` from its CommonJS files, with every
 * instrumentation package replaced by a stand-in that only records what was asked for. Throws if
 * the package's shape is not the expected one; the caller then loads it as it is.
 */
export function autoInstrumentationsDeferred(entry: string, configs: Record<string, object>): AutoInstrumentations {
  const requireFromPackage = createRequire(entry);
  const wanted: Wanted[] = [];
  const standIn = (pkg: string): object =>
    new Proxy(
      {},
      {
        get: (_, name) => {
          if (typeof name !== 'string' || !name.endsWith('Instrumentation')) return undefined;
          const exportName = name;
          // Called with `new` by the package: what it asks for is recorded, nothing is made.
          return function standInInstrumentation(config: unknown): void {
            wanted.push({ pkg, exportName, config });
          };
        },
      },
    );
  const exports = loadWithStandIns(entry, (id) => (INSTRUMENTATION.test(id) ? standIn(id) : DETECTORS.test(id) ? {} : undefined)) as {
    getNodeAutoInstrumentations?: unknown;
  };
  if (typeof exports.getNodeAutoInstrumentations !== 'function') throw new Error('no getNodeAutoInstrumentations');
  const made = (exports.getNodeAutoInstrumentations as (c: object) => unknown[])(configs);
  if (made.length !== wanted.length) throw new Error('instrumentations made otherwise than with new');

  const now: Instrumentation[] = [];
  const later: (Wanted & { targets: readonly string[] })[] = [];
  // A package that cannot be loaded throws (at start-up: the install is broken, said by the caller);
  // one that throws as it is made is skipped and said, as the package itself does.
  const make = (w: Wanted): Instrumentation | undefined => {
    const Made = (requireFromPackage(w.pkg) as Record<string, (new (config: unknown) => Instrumentation) | undefined>)[w.exportName];
    if (Made === undefined) throw new Error(`${w.pkg} has no ${w.exportName}`);
    try {
      return new Made(w.config);
    } catch (err) {
      diag.error(`Cannot make ${w.pkg}`, err);
      return undefined;
    }
  };
  // A deferred instrumentation patches a module as it loads only through a require hook already in
  // place: the one its @opentelemetry/instrumentation copy installs with its first instrumentation.
  const copies = new Set<string>();
  const copyOf = (pkg: string): string | undefined => {
    try {
      return createRequire(requireFromPackage.resolve(pkg)).resolve('@opentelemetry/instrumentation');
    } catch {
      return undefined;
    }
  };
  const undecided: Wanted[] = [];
  for (const w of wanted) {
    if (INSTRUMENTATION_TARGETS[w.pkg] === undefined || typeof (nodeModule as Partial<typeof nodeModule>).registerHooks !== 'function') {
      const instrumentation = make(w);
      if (instrumentation === undefined) continue;
      now.push(instrumentation);
      const copy = copyOf(w.pkg);
      if (copy !== undefined) copies.add(copy);
    } else undecided.push(w);
  }
  for (const w of undecided) {
    const copy = copyOf(w.pkg);
    if (copy !== undefined && copies.has(copy)) later.push({ ...w, targets: INSTRUMENTATION_TARGETS[w.pkg] ?? [] });
    else {
      const instrumentation = make(w);
      if (instrumentation !== undefined) now.push(instrumentation);
    }
  }
  return { now, deferred: new DeferredInstrumentations(later, make) };
}

/**
 * Instrumentations made on the first resolution of a module they patch, from anywhere in the app
 * (`require`, `import`, a library's own require of it), before that module loads: the same moment
 * an instrumentation made at start-up would patch it.
 */
export class DeferredInstrumentations {
  private readonly stops: (() => void)[] = [];
  private readonly made: Instrumentation[] = [];

  constructor(
    private readonly entries: readonly (Wanted & { targets: readonly string[] })[],
    private readonly make: (w: Wanted) => Instrumentation | undefined,
  ) {}

  /** The module names they patch: for the ES module hook's include list, which must know them up front. */
  get modules(): string[] {
    return this.entries.flatMap((entry) => entry.targets);
  }

  /** Instrumentations made so far. */
  get instrumentations(): readonly Instrumentation[] {
    return this.made;
  }

  /** Starts watching module resolution. */
  start(): void {
    if (this.stops.length > 0) return;
    for (const entry of this.entries)
      this.stops.push(
        whenFirstResolved(entry.targets, () => {
          this.activate(entry);
        }),
      );
  }

  /** Stops watching; instrumentations already made stay as they are (as the SDK leaves its own). */
  stop(): void {
    for (const stop of this.stops.splice(0)) stop();
  }

  private activate(entry: Wanted): void {
    let instrumentation: Instrumentation | undefined;
    try {
      instrumentation = this.make(entry);
    } catch (err) {
      diag.error(`Cannot load ${entry.pkg}`, err); // never into the app's require of the module
    }
    if (instrumentation === undefined) return;
    this.made.push(instrumentation);
    registerInstrumentations({ instrumentations: [instrumentation] }); // the global providers, as at start-up
  }
}

/**
 * Evaluates a package's CommonJS file with a `require` that hands out `standIn(id)` where it gives
 * one, and the package's own files evaluated the same way. `vm.compileFunction` is CommonJS's own
 * wrapper, so the code runs as it would under `require`.
 */
function loadWithStandIns(file: string, standIn: (id: string) => object | undefined): unknown {
  const module = { exports: {} as unknown };
  const requireReal = createRequire(file);
  const requireHere = (id: string): unknown =>
    standIn(id) ?? (id.startsWith('./') || id.startsWith('../') ? loadWithStandIns(requireReal.resolve(id), standIn) : requireReal(id));
  const wrapper = compileFunction(readFileSync(file, 'utf8'), ['exports', 'require', 'module', '__filename', '__dirname'], {
    filename: file,
  }) as (...args: unknown[]) => void;
  wrapper.call(module.exports, module.exports, requireHere, module, file, dirname(file));
  return module.exports;
}
