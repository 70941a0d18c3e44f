// A real Jaeger v2 and an OpenTelemetry Collector on loopback, without Docker: the Jaeger binary
// (built once from the Go module proxy by build-jaeger.sh) runs twice — once as the trace store
// with its query API (jaeger.yaml), once as the collector in front of it (config.yaml).
//
//   node otel-collector/local-stack.mjs            # start, print the endpoints, stop on Ctrl-C
//   import { startLocalStack } from './local-stack.mjs'   # from tests and the demo
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(new URL('.', import.meta.url));

/** Builds Jaeger if needed and returns the binary's path. */
export function jaegerBinary() {
  return execFileSync('bash', [`${HERE}build-jaeger.sh`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim()
    .split('\n')
    .pop();
}

/**
 * Starts the stack. Ports default to the standard ones (OTLP 4317/4318, query 16686); tests pass
 * a `base` to move every port (base+0 OTLP gRPC, +1 OTLP HTTP, +2 query HTTP, +3 query gRPC,
 * +4 Jaeger's own OTLP gRPC, +5 the collector's Prometheus endpoint). `uiAssets` (default: env JAEGER_UI_ASSETS_PATH) is a built jaeger-ui
 * folder to serve at the query URL instead of the placeholder. Resolves once both are accepting;
 * `stop()` ends both.
 */
export async function startLocalStack({
  base,
  log = false,
  collectorHost = '127.0.0.1',
  uiAssets = process.env.JAEGER_UI_ASSETS_PATH || undefined,
} = {}) {
  const ports =
    base === undefined
      ? { grpc: 4317, http: 4318, query: 16686, queryGrpc: 16685, store: 24317, prometheus: 8889 }
      : { grpc: base, http: base + 1, query: base + 2, queryGrpc: base + 3, store: base + 4, prometheus: base + 5 };
  const ui = uiAssets === undefined ? undefined : resolvePath(uiAssets);
  if (ui !== undefined && !existsSync(`${ui}/index.html`))
    throw new Error(
      `JAEGER_UI_ASSETS_PATH / uiAssets: ${ui} has no index.html; give the folder of a built jaeger-ui (e.g. its build/ output)`,
    );
  const binary = jaegerBinary();
  const env = {
    ...process.env,
    JAEGER_UI_ASSETS_PATH: ui ?? '',
    COLLECTOR_OTLP_GRPC_ENDPOINT: `${collectorHost}:${ports.grpc}`,
    COLLECTOR_OTLP_HTTP_ENDPOINT: `${collectorHost}:${ports.http}`,
    COLLECTOR_BATCH_TIMEOUT: '200ms',
    COLLECTOR_PROMETHEUS_ENDPOINT: `127.0.0.1:${ports.prometheus}`,
    COLLECTOR_SPANMETRICS_FLUSH: '1s',
    JAEGER_QUERY_HTTP_ENDPOINT: `127.0.0.1:${ports.query}`,
    JAEGER_QUERY_GRPC_ENDPOINT: `127.0.0.1:${ports.queryGrpc}`,
    JAEGER_OTLP_GRPC_ENDPOINT: `127.0.0.1:${ports.store}`,
  };
  const stdio = ['ignore', log ? 'inherit' : 'ignore', log ? 'inherit' : 'pipe'];
  const children = [];
  const stop = async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', resolve);
            child.kill('SIGTERM');
            setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
          }),
      ),
    );
  };
  try {
    const store = spawn(binary, ['--config', `${HERE}jaeger.yaml`], { env, stdio });
    children.push(store);
    await waitForPort(ports.store, store, 'jaeger (store)');
    await waitForPort(ports.query, store, 'jaeger (query)');
    await startCollector();
  } catch (err) {
    await stop();
    throw err;
  }
  async function startCollector() {
    const collector = spawn(binary, ['--config', `${HERE}config.yaml`], { env, stdio });
    children[1] = collector;
    await waitForPort(ports.http, collector, 'collector', 60_000, collectorHost);
  }
  return {
    otlpHttpEndpoint: `http://${collectorHost}:${ports.http}`,
    otlpGrpcEndpoint: `http://${collectorHost}:${ports.grpc}`,
    queryUrl: `http://127.0.0.1:${ports.query}`,
    /** The collector's Prometheus endpoint: lifeline's metrics and the spanmetrics connector's. */
    prometheusUrl: `http://127.0.0.1:${ports.prometheus}/metrics`,
    /** Where the real Jaeger UI is served, when `uiAssets` gave one (else the query URL has a placeholder page). */
    uiUrl: ui === undefined ? undefined : `http://127.0.0.1:${ports.query}`,
    /** Kills the collector at once (SIGKILL), as a crash would; Jaeger keeps running. */
    killCollector: () =>
      new Promise((resolve) => {
        const collector = children[1];
        if (collector.exitCode !== null || collector.signalCode !== null) return resolve();
        collector.once('exit', resolve);
        collector.kill('SIGKILL');
      }),
    /** Starts the collector again after killCollector(). */
    restartCollector: startCollector,
    stop,
  };
}

/** Builds lifeline's agent/gateway collector if needed (build-collector.sh) and returns the binary's path. */
export function collectorBinary() {
  return execFileSync('bash', [`${HERE}build-collector.sh`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim()
    .split('\n')
    .pop();
}

/**
 * Starts the collector tier on loopback: an agent (agent.yaml) routing by trace ID to two
 * gateways (gateway.yaml, tail sampling), in front of Jaeger on Badger (jaeger-badger.yaml, in
 * `badgerDir`). Ports from `base`: +0 agent OTLP gRPC, +1 agent OTLP HTTP, +2 and +3 the gateways,
 * +4 Jaeger's OTLP gRPC, +5 query HTTP, +6 query gRPC. Each process can be killed and started again.
 */
export async function startCollectorTier({
  base,
  badgerDir,
  decisionWait = '40s',
  routinePercent = 1,
  agentQueueSize = 1000,
  log = false,
}) {
  const [jaegerBin, collectorBin] = [jaegerBinary(), collectorBinary()];
  const ports = {
    agentGrpc: base,
    agentHttp: base + 1,
    gateways: [base + 2, base + 3],
    store: base + 4,
    query: base + 5,
    queryGrpc: base + 6,
  };
  const env = {
    ...process.env,
    JAEGER_BADGER_DIR: badgerDir,
    JAEGER_OTLP_GRPC_ENDPOINT: `127.0.0.1:${ports.store}`,
    JAEGER_QUERY_HTTP_ENDPOINT: `127.0.0.1:${ports.query}`,
    JAEGER_QUERY_GRPC_ENDPOINT: `127.0.0.1:${ports.queryGrpc}`,
    JAEGER_UI_ASSETS_PATH: '',
    TAIL_DECISION_WAIT: decisionWait,
    ROUTINE_PERCENT: String(routinePercent),
    AGENT_OTLP_GRPC_ENDPOINT: `127.0.0.1:${ports.agentGrpc}`,
    AGENT_OTLP_HTTP_ENDPOINT: `127.0.0.1:${ports.agentHttp}`,
    AGENT_QUEUE_SIZE: String(agentQueueSize),
    AGENT_BATCH_TIMEOUT: '200ms',
    GATEWAYS: `[${ports.gateways.map((port) => `127.0.0.1:${port}`).join(', ')}]`,
  };
  const stdio = ['ignore', log ? 'inherit' : 'ignore', log ? 'inherit' : 'pipe'];
  const processes = [];
  /** A process of the tier: started at once, and again after a kill. */
  const managed = async (name, binary, config, port, extraEnv = {}) => {
    const entry = { name, child: undefined };
    entry.start = async () => {
      entry.child = spawn(binary, ['--config', `${HERE}${config}`], { env: { ...env, ...extraEnv }, stdio });
      await waitForPort(port, entry.child, name);
    };
    entry.kill = () =>
      new Promise((resolve) => {
        const child = entry.child;
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', resolve);
        child.kill('SIGKILL');
      });
    processes.push(entry);
    await entry.start();
    return entry;
  };
  const stop = () =>
    Promise.all(
      processes.map(
        ({ child }) =>
          new Promise((resolve) => {
            if (child === undefined || child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', resolve);
            child.kill('SIGTERM');
            setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
          }),
      ),
    );
  try {
    const jaeger = await managed('jaeger', jaegerBin, 'jaeger-badger.yaml', ports.query);
    const gateways = [];
    for (const [i, port] of ports.gateways.entries())
      gateways.push(
        await managed(`gateway ${i + 1}`, collectorBin, 'gateway.yaml', port, { GATEWAY_OTLP_GRPC_ENDPOINT: `127.0.0.1:${port}` }),
      );
    const agent = await managed('agent', collectorBin, 'agent.yaml', ports.agentHttp);
    return {
      otlpHttpEndpoint: `http://127.0.0.1:${ports.agentHttp}`,
      queryUrl: `http://127.0.0.1:${ports.query}`,
      jaeger,
      gateways,
      agent,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function waitForPort(port, child, name, timeoutMs = 60_000, host = '127.0.0.1') {
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4_000);
  });
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}: ${stderr}`);
    if (await accepts(port, host)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${name} did not listen on ${port} within ${timeoutMs} ms: ${stderr}`);
}

function accepts(port, host) {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const stack = await startLocalStack({ log: true });
  console.log(
    `collector OTLP: ${stack.otlpHttpEndpoint} (http), ${stack.otlpGrpcEndpoint} (grpc)\nJaeger query: ${stack.queryUrl}${stack.uiUrl === undefined ? ' (set JAEGER_UI_ASSETS_PATH to a built jaeger-ui for the real UI)' : ' (Jaeger UI)'}\nCtrl-C to stop.`,
  );
  const shutdown = () => stack.stop().then(() => process.exit(0));
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}
