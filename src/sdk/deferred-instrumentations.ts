import { metrics, trace } from '@opentelemetry/api';
import { registerInstrumentations, type Instrumentation } from '@opentelemetry/instrumentation';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, sep } from 'node:path';
import { compileFunction } from 'node:vm';
import { whenFirstResolved } from '../hooks/index.js';
import type { Logger } from '../log/index.js';
import { INSTRUMENTATION_TARGETS } from './instrumentation-targets.js';

/**
 * The auto-instrumentations package, loaded so that an instrumentation of a library the app never
 * loads costs nothing: its package `require`s all ~40 instrumentation packages and every cloud
 * resource detector at import (~200 ms and ~35 MB here), though a service loads a handful of the
 * libraries they patch. Its own code still decides which instrumentations are on and with what
 * configuration (`OTEL_NODE_ENABLED_INSTRUMENTATIONS`, its defaults, the configs lifeline passes);
 * only the construction waits. Made at once, as before: those of Node's own modules, of a package
 * version the table was not made from, of a library already loaded, and any whose
 * `@opentelemetry/instrumentation` copy no instrumentation made at once shares.
 */
export interface AutoInstrumentations {
  /** Made now, for the SDK to enable. */
  readonly now: Instrumentation[];
  /** Made when the app first resolves a module they patch. */
  readonly deferred: DeferredInstrumentations;
}

interface Wanted {
  readonly pkg: string;
  readonly exportName: string;
  readonly config: unknown;
}
type Deferred = Wanted & { readonly targets: readonly string[] };

const INSTRUMENTATION = /^@opentelemetry\/instrumentation-/;
/** Only read by the package's resource-detector function, which lifeline never calls (it has its own). */
const DETECTORS = /^@opentelemetry\/(resource-detector-|resources$)/;

/**
 * Runs the package's `getNodeAutoInstrumentations(configs)` from its CommonJS files, with every
 * instrumentation package replaced by a stand-in that only records what was asked for. Throws,
 * having made nothing, if the package's shape is not the one expected (the caller then loads it as
 * it is), or if an instrumentation package cannot be loaded (a broken install, said at start-up).
 */
export function autoInstrumentationsDeferred(entry: string, configs: Record<string, object>, logger: Logger): AutoInstrumentations {
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
  const asked = (exports.getNodeAutoInstrumentations as (c: object) => unknown[])(configs);
  // None asked for, or one made otherwise than with `new` of a stand-in: not the shape this knows.
  if (asked.length !== wanted.length || (wanted.length === 0 && asked.length === 0 && !allTurnedOff())) throw new Error('unexpected shape');

  type Made = new (config: unknown) => Instrumentation;
  // Throws for a package that cannot be loaded: at start-up, a broken install.
  const load = (w: Wanted): Made => {
    const Made = (requireFromPackage(w.pkg) as Record<string, Made | undefined>)[w.exportName];
    if (Made === undefined) throw new Error(`${w.pkg} has no ${w.exportName}`);
    return Made;
  };
  const construct = (w: Wanted, Made: Made): Instrumentation | undefined => {
    try {
      return new Made(w.config);
    } catch (err) {
      logger.warn({ err, instrumentation: w.pkg }, 'lifeline: an instrumentation could not be made; the app runs without it');
      return undefined;
    }
  };
  // A deferred instrumentation patches a module as it loads only through a require hook already in
  // place: the one its @opentelemetry/instrumentation copy installs with its first instrumentation.
  // Decided from resolution alone, so that nothing is made (and enabled) before every package loads.
  const copyOf = (pkg: string): string | undefined => {
    try {
      return createRequire(requireFromPackage.resolve(pkg)).resolve('@opentelemetry/instrumentation');
    } catch {
      return undefined;
    }
  };
  const alreadyLoaded = loadedPackages();
  const targetsOf = (w: Wanted): readonly string[] | undefined => {
    const known = INSTRUMENTATION_TARGETS[w.pkg];
    if (known === undefined || known.version !== versionOf(requireFromPackage, w.pkg)) return undefined;
    return known.modules.some((name) => alreadyLoaded.has(name)) ? undefined : known.modules;
  };
  const eager: Wanted[] = [];
  const undecided: Deferred[] = [];
  for (const w of wanted) {
    const targets = targetsOf(w);
    if (targets === undefined) eager.push(w);
    else undecided.push({ ...w, targets });
  }
  const copies = new Set(eager.map((w) => copyOf(w.pkg)));
  const later = undecided.filter((w) => {
    const copy = copyOf(w.pkg);
    return copy !== undefined && copies.has(copy);
  });
  eager.push(...undecided.filter((w) => !later.includes(w)));
  const classes = eager.map(load);
  const now = eager.flatMap((w, i) => construct(w, classes[i] as Made) ?? []);
  return {
    now,
    deferred: new DeferredInstrumentations(later, (w) => {
      try {
        return construct(w, load(w));
      } catch (err) {
        logger.warn({ err, instrumentation: w.pkg }, 'lifeline: an instrumentation could not be loaded; the app runs without it');
        return undefined;
      }
    }),
  };
}

/** `OTEL_NODE_ENABLED_INSTRUMENTATIONS` names none the package has: then none asked for is right. */
function allTurnedOff(): boolean {
  return process.env.OTEL_NODE_ENABLED_INSTRUMENTATIONS !== undefined;
}

/** The packages of the CommonJS modules already loaded (an app that loaded a library before lifeline started). */
function loadedPackages(): Set<string> {
  const names = new Set<string>();
  const marker = `${sep}node_modules${sep}`;
  for (const file of Object.keys(createRequire(import.meta.url).cache)) {
    const at = file.lastIndexOf(marker);
    if (at === -1) continue;
    const parts = file.slice(at + marker.length).split(sep);
    names.add(parts[0]?.startsWith('@') === true ? `${parts[0]}/${parts[1] ?? ''}` : (parts[0] ?? ''));
  }
  return names;
}

/** The installed version of `pkg` as found from the package, from its package.json; `undefined` if unreadable. */
function versionOf(requireFromPackage: NodeJS.Require, pkg: string): string | undefined {
  try {
    const main = requireFromPackage.resolve(pkg);
    const dir = main.slice(0, main.lastIndexOf(`${sep}node_modules${sep}${pkg.split('/').join(sep)}${sep}`));
    const manifest = join(dir, 'node_modules', ...pkg.split('/'), 'package.json');
    return (JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/**
 * Instrumentations made on the first resolution of a module they patch, from anywhere in the app
 * (`require`, `import`, a library's own require of it), before that module loads: the same moment
 * an instrumentation made at start-up would patch it. Given the SDK's providers once it has started
 * (an instrumentation made earlier, while the SDK loads its own modules, waits for them).
 */
export class DeferredInstrumentations {
  private readonly stops: (() => void)[] = [];
  private waiting: Instrumentation[] | undefined = [];

  constructor(
    private readonly entries: readonly Deferred[],
    private readonly make: (w: Wanted) => Instrumentation | undefined,
  ) {}

  /** The module names they patch: for the ES module hook's include list, which must know them up front. */
  get modules(): string[] {
    return this.entries.flatMap((entry) => entry.targets);
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

  /** The SDK has registered its providers: those made before get them now, later ones at once. */
  providersReady(): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting !== undefined && waiting.length > 0) register(waiting);
  }

  /** Stops watching; instrumentations already made stay as they are (as the SDK leaves its own). */
  stop(): void {
    for (const stop of this.stops.splice(0)) stop();
  }

  private activate(entry: Wanted): void {
    const instrumentation = this.make(entry); // never throws: not into the app's require of the module
    if (instrumentation === undefined) return;
    if (this.waiting !== undefined) this.waiting.push(instrumentation);
    else register([instrumentation]);
  }
}

/** As the SDK registers its own: with the global providers (the metrics API has no stand-in for a later one). */
function register(instrumentations: Instrumentation[]): void {
  registerInstrumentations({ instrumentations, tracerProvider: trace.getTracerProvider(), meterProvider: metrics.getMeterProvider() });
}

/**
 * Evaluates a package's CommonJS file with a `require` that hands out `standIn(id)` where it gives
 * one, and the package's own files evaluated the same way. `vm.compileFunction` is CommonJS's own
 * wrapper, so the code runs as it would under `require`.
 */
function loadWithStandIns(
  file: string,
  standIn: (id: string) => object | undefined,
  loaded = new Map<string, { exports: unknown }>(),
): unknown {
  const cached = loaded.get(file);
  if (cached !== undefined) return cached.exports; // a cycle among the package's files, as require would
  const module = { exports: {} as unknown };
  loaded.set(file, module);
  const requireReal = createRequire(file);
  const requireHere = (id: string): unknown =>
    standIn(id) ??
    (id.startsWith('./') || id.startsWith('../') ? loadWithStandIns(requireReal.resolve(id), standIn, loaded) : requireReal(id));
  const wrapper = compileFunction(readFileSync(file, 'utf8'), ['exports', 'require', 'module', '__filename', '__dirname'], {
    filename: file,
  }) as (...args: unknown[]) => void;
  wrapper.call(module.exports, module.exports, requireHere, module, file, dirname(file));
  return module.exports;
}
