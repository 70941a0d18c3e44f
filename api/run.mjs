// The public surface of every entry in package.json `exports`, from the built declarations (dist/):
//   node api/run.mjs check   fail when api/*.api.md or docs/api/ differ from what the code declares
//   node api/run.mjs update  rewrite api/*.api.md (the API reports, reviewed in diffs)
//   node api/run.mjs docs    rewrite docs/api/ (the reference, from the TSDoc, by api-documenter; page names: documenter-names.mjs)
// The npm scripts api:check, api:update and docs:api build first.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CompilerState, Extractor, ExtractorConfig } from '@microsoft/api-extractor';

const mode = process.argv[2];
if (mode !== 'check' && mode !== 'update' && mode !== 'docs') {
  console.error('usage: node api/run.mjs check|update|docs');
  process.exit(2);
}

const root = path.resolve(import.meta.dirname, '..');
const configPath = path.join(root, 'api', 'api-extractor.json');
const packageJsonPath = path.join(root, 'package.json');
const pkg = JSON.parse(fs.readFileSync(packageJsonPath, 'utf8'));
const work = path.join(root, '.cache', 'api');
const modelFolder = path.join(work, 'model');
const docsFolder = path.join(root, 'docs', 'api');

// api-extractor and api-documenter know one entry point per package, so each entry is a package of
// its own in the doc model: `otel-lifeline`, `otel-lifeline-sdk`, … (a TSDoc link across entries
// names it that way: {@link otel-lifeline#startWatchdog}). The reference shows the import path.
const entries = Object.entries(pkg.exports)
  .filter(([, target]) => typeof target === 'object' && target.types !== undefined)
  .map(([subpath, target]) => {
    const sub = subpath.replace(/^\.\/?/, '');
    return {
      importPath: sub === '' ? pkg.name : `${pkg.name}/${sub}`,
      name: sub === '' ? pkg.name : `${pkg.name}-${sub.replaceAll('/', '-')}`,
      dts: path.join(root, target.types),
    };
  });
for (const { dts } of entries) {
  if (!fs.existsSync(dts)) {
    console.error(`${path.relative(root, dts)} is missing: npm run build first`);
    process.exit(1);
  }
}

fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(modelFolder, { recursive: true });

let failed = false;
let compilerState;
for (const entry of entries) {
  const configObject = ExtractorConfig.loadFile(configPath);
  configObject.mainEntryPointFilePath = entry.dts;
  configObject.apiReport.reportFileName = entry.name;
  // `docs` leaves the reports alone (forgotten exports are then reported by `check` and `update` only).
  configObject.apiReport.enabled = mode !== 'docs';
  if (mode === 'docs') configObject.messages.extractorMessageReporting['ae-forgotten-export'] = { logLevel: 'none' };
  configObject.docModel.apiJsonFilePath = path.join(modelFolder, `${entry.name}.api.json`);
  const config = ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: configPath,
    packageJsonFullPath: packageJsonPath,
    packageJson: { ...pkg, name: entry.name },
  });
  // One TypeScript program for all the entries.
  compilerState ??= CompilerState.create(config, { additionalEntryPoints: entries.map((e) => e.dts) });
  console.log(`== ${entry.importPath}`);
  const result = Extractor.invoke(config, { localBuild: mode !== 'check', compilerState, printApiReportDiff: true });
  if (!result.succeeded) failed = true;
  if (mode === 'check' && result.apiReportChanged) {
    console.error(`api/${entry.name}.api.md differs from the code (diff above): review it, then npm run api:update`);
  }
}

// Forgotten exports: types that public signatures use but the entry does not export. One that another
// entry exports is importable from there; one that no entry exports is a leak.
if (mode !== 'docs') {
  const exported = new Map(entries.map((e) => [e.name, exportsOf(e.name)]));
  for (const entry of entries) {
    const report = fs.readFileSync(path.join(work, 'report', `${entry.name}.api.md`), 'utf8');
    for (const [, symbol] of report.matchAll(/\(ae-forgotten-export\) The symbol "([^"]+)"/g)) {
      const from = entries.filter((e) => exported.get(e.name).has(symbol)).map((e) => e.importPath);
      const where = from.length > 0 ? `exported by ${from.join(', ')}` : 'exported by no entry';
      console.log(`forgotten export in ${entry.importPath}: ${symbol} (${where})`);
    }
  }
}

if (mode !== 'update') {
  const out = mode === 'docs' ? docsFolder : path.join(work, 'docs');
  const documenter = path.join(root, 'node_modules', '.bin', 'api-documenter');
  const names = path.join(root, 'api', 'documenter-names.mjs');
  const run = spawnSync(
    process.execPath,
    ['--import', names, documenter, 'markdown', '--input-folder', modelFolder, '--output-folder', out],
    {
      encoding: 'utf8',
      env: { ...process.env, API_DOCUMENTER_CASE_NAMES: JSON.stringify(caseCollisions()) },
    },
  );
  if (run.status !== 0) {
    console.error(run.stdout, run.stderr);
    process.exit(1);
  }
  showImportPaths(out);
  if (mode === 'check') {
    const stale = compareFolders(docsFolder, out);
    if (stale.length > 0) {
      failed = true;
      console.error(`docs/api is stale (${stale.join(', ')}): npm run docs:api`);
    } else {
      console.log('docs/api is current');
    }
  } else {
    console.log(`docs/api: ${fs.readdirSync(out).length} files`);
  }
}

process.exit(failed ? 1 : 0);

/** The names an entry exports, from its doc model. */
function exportsOf(name) {
  const model = JSON.parse(fs.readFileSync(path.join(modelFolder, `${name}.api.json`), 'utf8'));
  return new Set(model.members.flatMap((entryPoint) => entryPoint.members.map((member) => member.name)));
}

/**
 * The names that differ from another name of their scope (an entry, a class, …) only in case, in
 * any entry's doc model, but the one of each such set with the fewest capitals (`health`, not
 * `Health`): api/documenter-names.mjs gives them pages of their own.
 */
function caseCollisions() {
  const capitals = (name) => name.replace(/[^A-Z]/g, '').length;
  const renamed = new Set();
  const walk = (item) => {
    const spellings = new Map();
    for (const member of item.members ?? []) {
      walk(member);
      if (member.name === undefined) continue; // a constructor, an index signature
      const lower = member.name.toLowerCase();
      spellings.set(lower, (spellings.get(lower) ?? new Set()).add(member.name));
    }
    for (const names of spellings.values()) {
      const [, ...others] = [...names].sort((a, b) => capitals(a) - capitals(b) || (a < b ? -1 : a > b ? 1 : 0));
      for (const name of others) renamed.add(name);
    }
  };
  for (const { name } of entries) walk(JSON.parse(fs.readFileSync(path.join(modelFolder, `${name}.api.json`), 'utf8')));
  return [...renamed].sort();
}

/** Shows `otel-lifeline-sdk` as `otel-lifeline/sdk` in the text of the reference (file names stay). */
function showImportPaths(folder) {
  const renames = entries.filter((e) => e.name !== e.importPath);
  for (const file of fs.readdirSync(folder)) {
    const filePath = path.join(folder, file);
    let text = fs.readFileSync(filePath, 'utf8');
    for (const { name, importPath } of renames) {
      // Not inside a link target such as ./otel-lifeline-sdk.startlifeline.md
      text = text.replace(new RegExp(`(?<![./\\w-])${name}(?![\\w-]|[\\w.-]*\\.md\\b)`, 'g'), importPath);
    }
    fs.writeFileSync(filePath, text);
  }
}

/** The files that differ between two flat folders. */
function compareFolders(expected, actual) {
  const names = new Set([...(fs.existsSync(expected) ? fs.readdirSync(expected) : []), ...fs.readdirSync(actual)]);
  const read = (folder, file) => (fs.existsSync(path.join(folder, file)) ? fs.readFileSync(path.join(folder, file), 'utf8') : undefined);
  return [...names].filter((file) => read(expected, file) !== read(actual, file)).sort();
}
