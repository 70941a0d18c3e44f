// Compares two V8 CPU profiles per request: where one process spends more CPU than the other.
// Usage (after `BENCH_PROFILE=1 node bench/service.ts`, which prints each service's req/s):
//   node bench/profile-diff.mjs A.cpuprofile REQUESTS_A B.cpuprofile REQUESTS_B
// Prints self time in µs per request, by package and by function, sorted by A − B.
import fs from 'node:fs';

/** Self time (ms) by package and by function of one profile. */
function load(file) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
  const sampled = new Map();
  for (let i = 0; i < profile.samples.length; i++)
    sampled.set(profile.samples[i], (sampled.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const byPackage = new Map();
  const byFunction = new Map();
  for (const node of profile.nodes) {
    const ms = (sampled.get(node.id) ?? 0) / 1_000;
    const { url, functionName, lineNumber } = node.callFrame;
    const where = url.includes('node_modules/')
      ? url.replace(/.*node_modules\/((@[^/]+\/)?[^/]+).*/, '$1')
      : url.includes('/dist/')
        ? `lifeline:${url.replace(/.*\/dist\/([^/]+).*/, '$1')}`
        : url || functionName;
    byPackage.set(where, (byPackage.get(where) ?? 0) + ms);
    const fn = `${where} ${functionName || '(anonymous)'}:${lineNumber}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + ms);
  }
  return { byPackage, byFunction };
}

const [fileA, requestsA, fileB, requestsB] = process.argv.slice(2);
if (fileB === undefined || !(Number(requestsA) > 0) || !(Number(requestsB) > 0)) {
  console.error('usage: node bench/profile-diff.mjs A.cpuprofile REQUESTS_A B.cpuprofile REQUESTS_B');
  process.exit(2);
}
const a = load(fileA);
const b = load(fileB);
for (const [title, key, rows] of [
  ['by package', 'byPackage', 25],
  ['by function', 'byFunction', 30],
]) {
  const names = new Set([...a[key].keys(), ...b[key].keys()]);
  const perRequest = [...names].map((name) => {
    const x = ((a[key].get(name) ?? 0) * 1_000) / Number(requestsA);
    const y = ((b[key].get(name) ?? 0) * 1_000) / Number(requestsB);
    return { name, x, y, diff: x - y };
  });
  perRequest.sort((p, q) => q.diff - p.diff);
  console.log(`-- ${title}: µs per request, A − B, A, B`);
  for (const { name, x, y, diff } of perRequest.slice(0, rows))
    console.log(`${diff.toFixed(1).padStart(7)} ${x.toFixed(1).padStart(7)} ${y.toFixed(1).padStart(7)}  ${name}`);
}
