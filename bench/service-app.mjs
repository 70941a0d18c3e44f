// The service of bench/service, in a process of its own: each request fetches the upstream
// (keep-alive, Node's global fetch) and answers with its body. VARIANT=plain starts OpenTelemetry's
// NodeSDK with the undici and http instrumentations; VARIANT=handwritten the same, with
// `AbortSignal.timeout(10 s)` written on each fetch (what a user would do without lifeline);
// VARIANT=lifeline starts startLifeline with its defaults, and runs each fetch under a 10 s deadline. All three batch spans to an exporter that drops them
// (the comparison is making spans and deadlines, not shipping them). Prints {"port":N} when ready.
import { createRequire } from 'node:module';

const variant = process.env.VARIANT;
const upstream = process.env.UPSTREAM;
const discard = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: () => Promise.resolve(),
  forceFlush: () => Promise.resolve(),
};
let run = (fn) => fn();
let fetchOptions = () => undefined;
if (variant === 'plain' || variant === 'handwritten') {
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const { HttpInstrumentation } = await import('@opentelemetry/instrumentation-http');
  const { UndiciInstrumentation } = await import('@opentelemetry/instrumentation-undici');
  new NodeSDK({
    serviceName: 'bench-service',
    traceExporter: discard,
    instrumentations: [new HttpInstrumentation(), new UndiciInstrumentation()],
    metricReaders: [],
    logRecordProcessors: [],
  }).start();
  if (variant === 'handwritten') fetchOptions = () => ({ signal: AbortSignal.timeout(10_000) });
} else if (variant === 'lifeline') {
  const { startLifeline } = await import('otel-lifeline/sdk');
  const { withTimeout } = await import('otel-lifeline');
  await startLifeline({ serviceName: 'bench-service', traceExporter: discard, probe: { port: 0 } });
  run = (fn) => withTimeout(10_000, fn);
} else {
  throw new Error(`unknown VARIANT ${variant}`);
}

// Required once the SDK runs, so both variants get server spans: the http instrumentation patches
// node:http through require, and an ES module `import` at the top would have bound it before.
const { createServer } = createRequire(import.meta.url)('node:http');
const server = createServer((_req, res) => {
  run(async () => (await fetch(upstream, fetchOptions())).text()).then(
    (body) => res.end(body),
    (err) => {
      res.statusCode = 502;
      res.end(String(err));
    },
  );
});
server.keepAliveTimeout = 60_000;
// Exit normally on SIGTERM (a --cpu-prof profile is written only then).
process.on('SIGTERM', () => process.exit(0));
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
