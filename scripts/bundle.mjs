// Bundles what `tsc` emitted into dist/ so that a process loading lifeline reads a few files, not
// hundreds: resolving and compiling ~350 small modules (lifeline's own and its OpenTelemetry
// packages') was most of register mode's start-up. Every entry point of the package keeps its path
// and they share their chunks (dist/_chunks/), so the root entry and register mode run one copy of
// each module. The declarations (.d.ts) tsc wrote stay where they are.
//
// Left outside the bundle, loaded from the package's dependencies as before:
// - import-in-the-middle and require-in-the-middle: their loader hook and the modules it generates
//   import the hook registry by its file, so it must be that file's one instance (both are
//   dependencies of lifeline's own: the copy the bundle imports is the one the hook is loaded from);
// - @grpc/grpc-js (only the OTLP/gRPC exporter uses lifeline's copy) and pino (only loaded when
//   something is logged): large, and loaded lazily anyway;
// - what OpenTelemetry's packages `require` at run time (forwarded-parse): a dependency of
//   lifeline's own, so that it is found from dist/ (the package's own node_modules).
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));
const OUT = fileURLToPath(new URL('../dist.bundle/', import.meta.url));
/** Loaded by path or by `import`: package.json's exports and bin, and the watchdog thread's script. */
const ENTRIES = ['index', 'sdk/index', 'semconv/names', 'register/register', 'cli/main', 'watchdog/watchdog-worker'];
const EXTERNAL = /^(import-in-the-middle|require-in-the-middle|@grpc\/grpc-js|pino)(\/|$)/;
/**
 * Not minified: stack dumps and debuggers show the code as written. TSDoc is in the declarations;
 * in the JavaScript it is text every process would scan. Licences stay.
 */
const TEXT = { minify: false, comments: { legal: true, annotation: true, jsdoc: false } };

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
const bundle = await rolldown({
  input: Object.fromEntries(ENTRIES.map((entry) => [entry, join(DIST, `${entry}.js`)])),
  platform: 'node',
  external: (id) => id.startsWith('node:') || EXTERNAL.test(id),
  logLevel: 'warn',
});
await bundle.write({
  dir: OUT,
  format: 'esm',
  entryFileNames: '[name].js',
  // One level below dist/, like tsc's folders: paths relative to a module's own file
  // (`new URL('../_chunks/…', import.meta.url)`) mean the same from a chunk or a folder's file;
  // checked below for the one file that is not one level down, dist/index.js.
  chunkFileNames: '_chunks/[name]-[hash].js',
  ...TEXT,
});
await bundle.close();

// lifeline's own undici is required on the first request that needs it (src/undici/own-undici.ts),
// not imported at start-up: as CommonJS files instead of ~100 modules, and only the parts lifeline
// uses (its Agent, not fetch, mocks, WebSocket or caches: half of the code to compile). The symbols
// module is an entry of its own, read at start-up without the rest; both share its one instance.
const UNDICI_PARTS = {
  undici: `
const { getGlobalDispatcher, setGlobalDispatcher } = require('undici/lib/global.js');
module.exports = {
  Agent: require('undici/lib/dispatcher/agent.js'),
  Dispatcher: require('undici/lib/dispatcher/dispatcher.js'),
  FormData: require('undici/lib/web/fetch/formdata.js').FormData,
  getGlobalDispatcher,
  setGlobalDispatcher,
};
`,
  'undici-symbols': `module.exports = require('undici/lib/core/symbols.js');\n`,
};
for (const [name, text] of Object.entries(UNDICI_PARTS)) writeFileSync(join(OUT, `${name}.entry.cjs`), text);
const undici = await rolldown({
  input: Object.fromEntries(Object.keys(UNDICI_PARTS).map((name) => [name, join(OUT, `${name}.entry.cjs`)])),
  platform: 'node',
  logLevel: 'warn',
});
await undici.write({
  dir: join(OUT, '_chunks'),
  format: 'cjs',
  entryFileNames: '[name].cjs',
  chunkFileNames: 'undici-[name]-[hash].cjs',
  ...TEXT,
});
await undici.close();
for (const name of Object.keys(UNDICI_PARTS)) rmSync(join(OUT, `${name}.entry.cjs`));

// A module that finds files relative to itself must not land in dist/ itself (only the root
// entry does: were a module only it imports inlined there, its paths would point outside dist/).
for (const file of walk(OUT)) {
  if (!relative(OUT, file).includes(sep) && readFileSync(file, 'utf8').includes('import.meta')) {
    throw new Error(`${relative(OUT, file)} uses import.meta: its module's relative paths would be wrong there`);
  }
}

// tsc's JavaScript (and its maps, which name sources the package does not ship) give way to the
// bundle; its declarations stay.
for (const file of walk(DIST)) if (/\.js(\.map)?$/.test(file)) rmSync(file);
for (const file of walk(OUT)) {
  const to = join(DIST, relative(OUT, file));
  mkdirSync(join(to, '..'), { recursive: true });
  renameSync(file, to);
}
rmSync(OUT, { recursive: true, force: true });

function* walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* walk(path);
    else yield path;
  }
}
