// npm run demo: lifeline on a real service, traced through a real OpenTelemetry Collector into a
// real Jaeger, and read back from Jaeger's query API.
//
// Starts the local stack (Jaeger built from the Go module proxy on first run), runs
// examples/stuck-dependency under `node --import otel-lifeline/register`, prints the probe and Jaeger
// URLs, and after ~30 s prints what Jaeger holds: the calls aborted by deadlines (found by tag
// lifeline.deadline.exceeded=true) and the diagnostic of the component that got stuck. With
// JAEGER_UI_ASSETS_PATH set to a built jaeger-ui, Jaeger serves its real UI and the demo prints the
// links a person would open: the search, the stuck trace, the verdict. Beside it runs
// examples/stuck-request, a service with no lifeline code and no component (so no verdict, ever),
// with one request that hangs: the demo reads back the snapshot lifeline exported while it hung.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startLocalStack } from '../otel-collector/local-stack.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVICE = 'lifeline-demo';
const ZERO_CODE = 'lifeline-demo-zero-code';
const seconds = Number(process.env.DEMO_SECONDS ?? 30);
const probePort = Number(process.env.DEMO_PROBE_PORT ?? 5555);

console.log('Starting the OpenTelemetry Collector and Jaeger (the first run builds Jaeger: a few minutes)…');
const stack = await startLocalStack();
const app = spawn(process.execPath, ['--import', 'otel-lifeline/register', 'examples/stuck-dependency/server.mjs'], {
  cwd: ROOT,
  env: {
    ...process.env,
    OTEL_SERVICE_NAME: SERVICE,
    OTEL_EXPORTER_OTLP_ENDPOINT: stack.otlpHttpEndpoint,
    OTEL_BSP_SCHEDULE_DELAY: '500',
    LIFELINE_HEALTH_INTERVAL_MS: '2000',
    LIFELINE_PROBE_PORT: String(probePort),
    LIFELINE_LOG_LEVEL: 'warn',
    // The example has only lifeline's instrumentations (the repository's auto-instrumentations are a benchmark baseline).
    LIFELINE_AUTO_INSTRUMENTATIONS: 'off',
    PORT: '0',
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const started = await new Promise((resolve) => createInterface({ input: app.stdout }).once('line', (line) => resolve(JSON.parse(line))));
const zeroCode = spawn(process.execPath, ['--import', 'otel-lifeline/register', 'examples/stuck-request/server.mjs'], {
  cwd: ROOT,
  env: {
    ...process.env,
    OTEL_SERVICE_NAME: ZERO_CODE,
    OTEL_EXPORTER_OTLP_ENDPOINT: stack.otlpHttpEndpoint,
    OTEL_BSP_SCHEDULE_DELAY: '500',
    LIFELINE_HEALTH_INTERVAL_MS: '2000',
    LIFELINE_STUCK_AFTER_MS: '5000',
    LIFELINE_PROBE_PORT: '0',
    LIFELINE_LOG_LEVEL: 'warn',
    LIFELINE_AUTO_INSTRUMENTATIONS: 'off',
    PORT: '0',
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const zeroCodePort = await new Promise((resolve) =>
  createInterface({ input: zeroCode.stdout }).once('line', (line) => resolve(JSON.parse(line).port)),
);
// One request that hangs: its handler waits on a socket nothing bounds.
const hanging = new AbortController();
void fetch(`http://127.0.0.1:${zeroCodePort}/orders/42`, { signal: hanging.signal }).catch(() => undefined);

async function finish(code) {
  hanging.abort();
  zeroCode.kill('SIGTERM');
  app.kill('SIGTERM');
  await stack.stop();
  process.exit(code);
}
process.once('SIGINT', () => void finish(130));

const probe = `http://127.0.0.1:${probePort}`;
console.log(`
service       examples/stuck-dependency (port ${started.port}); its dependency ${started.dependency} never answers
zero-code     examples/stuck-request (port ${zeroCodePort}, no component): GET /orders/42 hangs on a stock service that never answers
probes        ${probe}/live  ${probe}/ready   (try: npx lifeline health --url ${probe} --probe live)
Jaeger API    ${stack.queryUrl}/api/traces?service=${SERVICE}&tags=${encodeURIComponent('{"lifeline.deadline.exceeded":"true"}')}
${stack.uiUrl === undefined ? "              (Jaeger's UI is a placeholder in a Go-built binary: set JAEGER_UI_ASSETS_PATH to a built jaeger-ui for the real one)" : `Jaeger UI     ${stack.uiUrl}/search?service=${SERVICE}&lookback=1h&tags=${encodeURIComponent('{"lifeline.in_flight":"true"}')}`}
`);

for (let elapsed = 0; elapsed < seconds; elapsed += 5) {
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  const live = await fetch(`${probe}/live`).then(
    async (r) => `${r.status} ${JSON.stringify(await r.json())}`,
    (e) => `unreachable: ${e.message}`,
  );
  console.log(`t+${String(elapsed + 5).padStart(2)} s  GET /live -> ${live}`);
}

async function traces(params, service = SERVICE) {
  const query = new URLSearchParams({ service, limit: '100', ...params });
  const body = await (await fetch(`${stack.queryUrl}/api/traces?${query}`)).json();
  return body.data ?? [];
}
const tag = (span, key) => span.tags.find((t) => t.key === key)?.value;

const aborted = (await traces({ tags: JSON.stringify({ 'lifeline.deadline.exceeded': 'true', 'error.type': 'timeout' }) }))
  .flatMap((t) => t.spans)
  .filter((s) => tag(s, 'span.kind') === 'client')
  .sort((a, b) => a.startTime - b.startTime);
console.log(`\nFrom Jaeger — calls aborted by their deadline (tag lifeline.deadline.exceeded=true): ${aborted.length}`);
for (const span of aborted.slice(-5)) {
  console.log(
    `  ${new Date(span.startTime / 1_000).toISOString()}  ${span.operationName} ${tag(span, 'url.full')}  ${Math.round(span.duration / 1_000)} ms  deadline source: ${tag(span, 'lifeline.deadline.source')}`,
  );
}

const verdictTrace = (await traces({ tags: JSON.stringify({ 'lifeline.health.component': 'indexer' }) })).find((t) =>
  t.spans.some((s) => s.operationName.startsWith('health verdict')),
);
const verdict = verdictTrace?.spans.find((s) => s.operationName.startsWith('health verdict'));
const fields = verdict?.logs.find((l) => l.fields.some((f) => f.value === 'lifeline.diagnostic'))?.fields ?? [];
const field = (key) => fields.find((f) => f.key === key)?.value;
console.log(
  `\nFrom Jaeger — the health verdict: unhealthy ${JSON.stringify(tag(verdict ?? { tags: [] }, 'lifeline.health.unhealthy') ?? null)}`,
);
if (verdict !== undefined) {
  console.log('  lifeline.diagnostic.overview:');
  for (const line of String(field('lifeline.diagnostic.overview')).split('\n')) console.log(`    ${line}`);
  console.log('  lifeline.diagnostic.stacks:');
  for (const line of String(field('lifeline.diagnostic.stacks')).split('\n').slice(0, 30)) console.log(`    ${line}`);
  const stuck = await traces({ tags: JSON.stringify({ 'lifeline.in_flight': 'true' }) });
  console.log(
    `  snapshot spans in the stuck traces: ${[...new Set(stuck.flatMap((t) => t.spans).map((s) => s.operationName))].join(', ')}`,
  );
  if (stack.uiUrl !== undefined) {
    console.log(`\nIn the Jaeger UI (while the demo runs):`);
    console.log(
      `  stuck traces   ${stack.uiUrl}/search?service=${SERVICE}&lookback=1h&tags=${encodeURIComponent('{"lifeline.in_flight":"true"}')}`,
    );
    for (const t of stuck.slice(0, 3)) console.log(`  stuck trace    ${stack.uiUrl}/trace/${t.traceID}`);
    console.log(`  the verdict    ${stack.uiUrl}/trace/${verdictTrace?.traceID ?? ''}`);
  }
}

const hung = (await traces({ tags: JSON.stringify({ 'lifeline.in_flight': 'true' }) }, ZERO_CODE))
  .flatMap((t) => t.spans)
  .find((s) => s.operationName.includes('(in flight'));
console.log(
  `\nFrom Jaeger — the zero-code service's hanging request (tag lifeline.in_flight=true, no verdict): ${hung === undefined ? 'none' : `${hung.operationName}, ${String(tag(hung, 'url.path') ?? tag(hung, 'http.target') ?? '')}`}`,
);
if (hung !== undefined && stack.uiUrl !== undefined)
  console.log(`  ${stack.uiUrl}/search?service=${ZERO_CODE}&lookback=1h&tags=${encodeURIComponent('{"lifeline.in_flight":"true"}')}`);

const urls = aborted.map((s) => String(tag(s, 'url.full')));
const ok =
  urls.some((u) => u.includes('/inventory')) && urls.some((u) => u.includes('/report')) && verdict !== undefined && hung !== undefined;
console.log(
  ok
    ? '\nDemo OK: deadlines ended the stuck fetch and node:http calls, so poller and reporter stayed healthy; indexer, stuck on a lock no deadline can reach, explained itself; and the zero-code service showed its hanging request while it hung.'
    : "\nDemo FAILED: expected aborted calls, a verdict and the zero-code service's stuck request in Jaeger.",
);
// A person at a terminal gets time to open the links; a script or CI gets its exit code at once.
if (ok && stack.uiUrl !== undefined && process.stdin.isTTY) {
  console.log('\nJaeger keeps running for the links above: Ctrl-C to stop.');
  await new Promise(() => undefined);
}
await finish(ok ? 0 : 1);
