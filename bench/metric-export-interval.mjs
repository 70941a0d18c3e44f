// An idle service in register mode exporting metrics to a receiver on loopback: its CPU share, exports
// and bytes over 5 s at the given OTEL_METRIC_EXPORT_INTERVAL (default 1, i.e. the floor of 1000 ms).
// `npx tsc -p tsconfig.build.json && node bench/metric-export-interval.mjs 1` (and `60000` for the default).
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';

const interval = process.argv[2] ?? '1';
const received = { exports: 0, bytes: 0 };
const server = createServer((req, res) => {
  req.on('data', (chunk) => (received.bytes += chunk.length));
  req.on('end', () => {
    if (req.url === '/v1/metrics') received.exports++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const app = `
  const start = process.cpuUsage(); const t0 = Date.now();
  setTimeout(() => { const u = process.cpuUsage(start); console.log('cpu', (u.user + u.system) / 1000 / (Date.now() - t0)); process.exit(0); }, 5000);
`;
const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', '--input-type=module', '-e', app], {
  cwd: fileURLToPath(new URL('..', import.meta.url)),
  env: {
    ...process.env,
    LIFELINE_PROBE_PORT: '0',
    OTEL_TRACES_EXPORTER: 'none',
    OTEL_METRICS_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(server.address().port)}`,
    OTEL_METRIC_EXPORT_INTERVAL: interval,
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let stdout = '';
child.stdout.on('data', (chunk) => (stdout += chunk));
await new Promise((resolve) => child.on('exit', resolve));
const cpu = Number(
  stdout
    .split('\n')
    .find((line) => line.startsWith('cpu '))
    ?.slice(4),
);
console.log(
  `OTEL_METRIC_EXPORT_INTERVAL=${interval}: ${(cpu * 100).toFixed(1)} % of a core, ${String(received.exports)} exports, ${(received.bytes / 1e6).toFixed(2)} MB in 5 s`,
);
for (const line of stdout.split('\n')) if (line.includes('"variable"')) console.log(JSON.parse(line).msg);
server.close();
