import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalStack, type LocalStack } from '../../otel-collector/local-stack.mjs';
import { blockingLine } from '../support/blocking.js';
import { ROOT, stopChild } from '../support/node.js';
import { startService, type ChildService } from '../support/service.js';
import { answersOk, serve, type TestServer } from '../support/servers.js';
import { eventually, findTraces, parentOf, tag, type JaegerSpan, type JaegerTrace } from '../support/jaeger.js';

let stack: LocalStack;
const running: { stop: () => Promise<void> }[] = [];
let upstream: TestServer;

/** Starts an example under `--import otel-lifeline/register`, exporting to the collector. */
async function example(script: string, service: string, env: NodeJS.ProcessEnv = {}): Promise<ChildService & { lines: string[] }> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'otel-lifeline/register', script], {
    cwd: ROOT,
    env: {
      ...process.env,
      OTEL_SERVICE_NAME: service,
      OTEL_EXPORTER_OTLP_ENDPOINT: stack.otlpHttpEndpoint,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      LIFELINE_PROBE_PORT: '0',
      PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => lines.push(line));
  const stop = () => stopChild(child);
  running.push({ stop });
  // The service's first line of its own: lifeline's JSON warnings (a short health interval) go to the same stdout.
  await eventually(
    () => Promise.resolve(lines.filter((line) => !line.includes('"name":"lifeline"')).length),
    (n) => n > 0,
    20_000,
  );
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
    }),
  );
  return {
    url: '',
    first: {},
    stdout: () => lines.join('\n'),
    stderr: () => '',
    stop,
    kill: (signal) => stopChild(child, signal),
    exited,
    lines,
  };
}

beforeAll(async () => {
  // Ports below the ephemeral range (32768+), where an outgoing connection may hold one; disjoint per file.
  stack = await startLocalStack({ base: 20_000 + (process.pid % 300) * 10 });
  upstream = await serve(answersOk);
});
afterAll(async () => {
  await Promise.all(running.map((r) => r.stop()));
  await upstream.close();
  await stack.stop();
});

const spansOf = (traces: JaegerTrace[]): JaegerSpan[] => traces.flatMap((t) => t.spans);

describe('lifeline read back from a real Jaeger, through a real collector', () => {
  it('stuck dependency: tick spans with deadlines, calls aborted by deadline under their tick, a verdict with its diagnostic and (in flight) spans', async () => {
    await example('examples/stuck-dependency/server.mjs', 'e2e-stuck', { LIFELINE_HEALTH_INTERVAL_MS: '500' });

    const ticks = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-stuck', { 'lifeline.health.component': 'poller' }),
      (t) => t.length > 0,
    );
    const tickSpans = spansOf(ticks).filter((s) => s.operationName === 'tick poller');
    for (const tickSpan of tickSpans) {
      expect(tag(tickSpan, 'lifeline.deadline.source')).toBe('tick');
      expect(tag(tickSpan, 'lifeline.deadline.at')).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(tag(tickSpan, 'lifeline.deadline.budget_ms')).toBeTypeOf('number');
    }
    // A tick taken late (its deadline already passed) has no budget left; a fresh one has the round's.
    expect(Math.max(...tickSpans.map((s) => Number(tag(s, 'lifeline.deadline.budget_ms'))))).toBeGreaterThan(0);

    // Found by tag, as a user would: the calls aborted by their deadline — both the fetch (undici)
    // calls of `poller` and the node:http calls of `reporter`.
    const isAborted = (s: JaegerSpan, path: string): boolean =>
      s.operationName === 'GET' && tag(s, 'lifeline.deadline.exceeded') === true && String(tag(s, 'url.full')).includes(path);
    const aborted = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-stuck', { 'lifeline.deadline.exceeded': 'true', 'error.type': 'timeout' }),
      (t) => spansOf(t).some((s) => isAborted(s, '/inventory')) && spansOf(t).some((s) => isAborted(s, '/report')),
    );
    const reported = spansOf(aborted).find((s) => isAborted(s, '/report')) as JaegerSpan;
    expect(tag(reported, 'otel.status_code')).toBe('ERROR');
    expect(tag(reported, 'lifeline.deadline.source')).toBe('tick');
    const trace = aborted.find((t) => t.spans.some((s) => isAborted(s, '/inventory'))) as JaegerTrace;
    const call = trace.spans.find((s) => isAborted(s, '/inventory')) as JaegerSpan;
    expect(tag(call, 'otel.status_code')).toBe('ERROR');
    expect(tag(call, 'url.full')).toContain('token=REDACTED');
    // Who made the aborted calls: the user's function, not lifeline's timer.
    expect(tag(call, 'code.function.name')).toBe('pollInventory');
    expect(tag(reported, 'code.file.path')).toBe(join(ROOT, 'examples/stuck-dependency/server.mjs'));
    // Its tick span is its ancestor, in the same trace.
    const byId = new Map(trace.spans.map((s) => [s.spanID, s]));
    let ancestor = byId.get(parentOf(call) ?? '');
    while (ancestor !== undefined && !ancestor.operationName.startsWith('tick ')) ancestor = byId.get(parentOf(ancestor) ?? '');
    expect(ancestor?.operationName).toBe('tick poller');

    // The component stuck without a deadline: the verdict, found by the component's name; its event
    // (Jaeger shows events as logs), summary first; the snapshot spans.
    const verdicts = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-stuck', { 'lifeline.health.component': 'indexer' }),
      (t) => spansOf(t).some((s) => s.operationName.startsWith('health verdict')),
    );
    const verdictTrace = verdicts.find((t) => t.spans.some((s) => s.operationName.startsWith('health verdict'))) as JaegerTrace;
    const verdict = verdictTrace.spans.find((s) => s.operationName.startsWith('health verdict')) as JaegerSpan;
    expect(verdict.operationName).toMatch(/^health verdict: .*indexer/);
    expect(tag(verdict, 'otel.status_code')).toBe('ERROR');
    const diagnostic = verdict.logs.find((l) => l.fields.some((f) => f.key === 'event' && f.value === 'lifeline.diagnostic'));
    const field = (key: string) => diagnostic?.fields.find((f) => f.key === key)?.value;
    expect(tag(verdict, 'lifeline.health.unhealthy')).toContain('indexer');
    expect(String(field('lifeline.diagnostic.overview'))).toMatch(
      /indexer \(liveness\) is unhealthy:\n {2}wait for index lock \(in flight \d+\.\d s, (no deadline|\d+\.\d s past its deadline)\) from rebuildIndex \(/,
    );
    expect(String(field('lifeline.diagnostic.span_tree'))).toContain('tick indexer');
    expect(String(field('lifeline.diagnostic.span_tree'))).toContain('wait for index lock');
    expect(String(field('lifeline.diagnostic.stacks'))).toContain('rebuildIndex');
    expect(JSON.stringify(verdicts)).not.toContain('s3cr3t-token');
    const why = verdictTrace.spans.find((s) => s.operationName === 'indexer unhealthy') as JaegerSpan;
    expect(tag(why, 'lifeline.health.component')).toBe('indexer');
    // The stuck tick's snapshot: the root of the tick's own trace (no parent Jaeger never got), past
    // its deadline (an error), linked both ways with the verdict.
    const inFlight = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-stuck', { 'lifeline.in_flight': 'true', 'lifeline.health.component': 'indexer' }),
      (t) => spansOf(t).some((s) => s.operationName.startsWith('wait for index lock (in flight')),
    );
    const stuckTrace = inFlight.find((t) => t.spans.some((s) => s.operationName.startsWith('tick indexer (in flight'))) as JaegerTrace;
    const tickSnapshot = stuckTrace.spans.find((s) => s.operationName.startsWith('tick indexer (in flight')) as JaegerSpan;
    expect(tickSnapshot.operationName).toMatch(/^tick indexer \(in flight, (past deadline|\d+ s past deadline)\)$/);
    expect(tag(tickSnapshot, 'otel.status_code')).toBe('ERROR');
    expect(
      tickSnapshot.references.filter((r) => r.refType === 'CHILD_OF'),
      JSON.stringify(tickSnapshot.references),
    ).toEqual([]);
    expect(tickSnapshot.references.map((r) => r.spanID)).toContain(why.spanID);
    expect(why.references.map((r) => r.spanID)).toContain(tickSnapshot.spanID);
    expect(String(field('lifeline.diagnostic.span_tree'))).toContain(stuckTrace.traceID);
    // What Jaeger's adjusters complain of (e.g. 'invalid parent span IDs'), with the spans it is said of.
    const warned = stuckTrace.spans
      .filter((s) => (s.warnings ?? []).length > 0)
      .map((s) => ({
        name: s.operationName,
        warnings: s.warnings,
        references: s.references,
        startTime: s.startTime,
        duration: s.duration,
      }));
    expect(
      warned,
      JSON.stringify(
        stuckTrace.spans.map((s) => ({ name: s.operationName, startTime: s.startTime, duration: s.duration, references: s.references })),
      ),
    ).toEqual([]);
  });

  it('head sampling at 1 %: the stuck and the aborted calls still reach Jaeger whole, with the verdict; routine requests mostly do not', async () => {
    const service = await example('examples/stuck-dependency/server.mjs', 'e2e-sampled', {
      LIFELINE_HEALTH_INTERVAL_MS: '500',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.01',
    });
    const { port } = JSON.parse(service.lines.find((line) => !line.includes('"name":"lifeline"')) ?? '{}') as { port: number };
    // Routine traffic: 200 requests answered 'ok', each a trace of its own the sampler drops 99 % of.
    for (let i = 0; i < 200; i++) await (await fetch(`http://127.0.0.1:${String(port)}/routine`)).text();

    // The calls aborted by their tick deadline, in traces the sampler dropped: exported whole, the
    // tick span (which ended after the call) in the same trace.
    const aborted = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-sampled', { 'lifeline.deadline.exceeded': 'true', 'error.type': 'timeout' }),
      (t) =>
        t.some((trace) => trace.spans.some((s) => s.operationName === 'tick poller') && trace.spans.some((s) => s.operationName === 'GET')),
    );
    const whole = aborted.find((t) => t.spans.some((s) => s.operationName === 'tick poller')) as JaegerTrace;
    const call = whole.spans.find((s) => s.operationName === 'GET' && tag(s, 'lifeline.deadline.exceeded') === true) as JaegerSpan;
    expect(whole.spans.find((s) => s.spanID === parentOf(call))?.operationName).toBe('tick poller');

    // The stuck component: its verdict, and the snapshot of its stuck tick in the tick's own trace.
    const verdicts = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-sampled', { 'lifeline.health.component': 'indexer' }),
      (t) => spansOf(t).some((s) => s.operationName.startsWith('health verdict')),
    );
    const verdict = spansOf(verdicts).find((s) => s.operationName.startsWith('health verdict')) as JaegerSpan;
    const tree = String(verdict.logs.flatMap((l) => l.fields).find((f) => f.key === 'lifeline.diagnostic.span_tree')?.value);
    const inFlight = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-sampled', { 'lifeline.in_flight': 'true', 'lifeline.health.component': 'indexer' }),
      (t) => spansOf(t).some((s) => s.operationName.startsWith('wait for index lock (in flight')),
    );
    const stuck = inFlight.find((t) => t.spans.some((s) => s.operationName.startsWith('tick indexer (in flight'))) as JaegerTrace;
    expect(tree).toContain(stuck.traceID);

    // Routine: at 1 %, 200 traces give 2 on average; 20 or more has a chance below 1e-8.
    const routine = await findTraces(stack.queryUrl, 'e2e-sampled', { 'url.path': '/routine' }, undefined, 200);
    expect(routine.length).toBeLessThan(20);
  });

  it("health as metrics: lifeline's own and the spanmetrics connector's, read from the collector's Prometheus endpoint", async () => {
    await example('examples/stuck-dependency/server.mjs', 'e2e-metrics', {
      LIFELINE_HEALTH_INTERVAL_MS: '500',
      OTEL_METRICS_EXPORTER: 'otlp',
      OTEL_METRIC_EXPORT_INTERVAL: '500',
    });
    const scrape = async (): Promise<string> => (await fetch(stack.prometheusUrl)).text();
    const line = (text: string, pattern: RegExp): string | undefined =>
      text.split('\n').find((l) => l.includes('job="e2e-metrics"') && pattern.test(l));
    const text = await eventually(
      scrape,
      (t) =>
        line(t, /^lifeline_health_status\w*\{[^}]*lifeline_health_component="indexer"[^}]*\} 0$/) !== undefined &&
        line(t, /^lifeline_deadline_exceeded\w*\{[^}]*server_address="127\.0\.0\.1"[^}]*\} [1-9]/) !== undefined &&
        line(t, /^traces_span_metrics_calls\w*\{[^}]*span_name="tick poller"/) !== undefined,
    );
    // The stuck component is unhealthy and turned so once; the tick lag of the stuck one grows.
    expect(line(text, /^lifeline_health_verdicts\w*\{[^}]*lifeline_health_component="indexer"[^}]*\} 1$/)).toBeDefined();
    expect(line(text, /^lifeline_health_tick_lag\w*\{[^}]*lifeline_health_component="indexer"/)).toBeDefined();
    expect(line(text, /^lifeline_health_components\w*\{[^}]*lifeline_health_state="unhealthy"/)).toBeDefined();
    expect(line(text, /^lifeline_event_loop_delay_p99\w*\{/)).toBeDefined();
  });

  it('deadline across two services: the callee records source inbound', async () => {
    const b = await startService(
      'test/fixtures/relay-service.mjs',
      {
        OTEL_SERVICE_NAME: 'e2e-b',
        OTEL_EXPORTER_OTLP_ENDPOINT: stack.otlpHttpEndpoint,
        OTEL_BSP_SCHEDULE_DELAY: '200',
        LIFELINE_PROBE_PORT: '0',
        NEXT_URL: upstream.url,
      },
      ['--import', 'otel-lifeline/register'],
    );
    const a = await startService(
      'test/fixtures/relay-service.mjs',
      {
        OTEL_SERVICE_NAME: 'e2e-a',
        OTEL_EXPORTER_OTLP_ENDPOINT: stack.otlpHttpEndpoint,
        OTEL_BSP_SCHEDULE_DELAY: '200',
        LIFELINE_PROBE_PORT: '0',
        NEXT_URL: b.url,
        TIMEOUT_MS: '3000',
      },
      ['--import', 'otel-lifeline/register'],
    );
    running.push(a, b);
    expect((await fetch(`${a.url}/go`)).status).toBe(200);
    // Each service exports on its own schedule: wait until both have reached Jaeger (a trace that
    // never joins them ends in eventually's timeout, naming what it saw).
    const servicesOf = (traces: Awaited<ReturnType<typeof findTraces>>) =>
      new Set(traces.flatMap((t) => Object.values(t.processes).map((p) => p.serviceName)));
    const traces = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-b', { 'lifeline.deadline.source': 'inbound' }),
      (t) => spansOf(t).some((s) => tag(s, 'span.kind') === 'client') && servicesOf(t).has('e2e-a'),
    );
    expect(servicesOf(traces)).toEqual(new Set(['e2e-a', 'e2e-b'])); // one trace across both
  });

  it('an unmodified service under --import emits client spans marked lifeline.deadline.missing', async () => {
    await example('examples/plain-service/server.mjs', 'e2e-plain', { UPSTREAM_URL: `${upstream.url}/status`, POLL_MS: '200' });
    const traces = await eventually(
      () => findTraces(stack.queryUrl, 'e2e-plain', { 'lifeline.deadline.missing': 'true' }),
      (t) => t.length > 0,
    );
    expect(tag(spansOf(traces)[0] as JaegerSpan, 'span.kind')).toBe('client');
  });

  it('pino lines written in tick work carry the trace id Jaeger has', async () => {
    const service = await example('examples/ticked-poller/server.mjs', 'e2e-ticked', {
      UPSTREAM_URL: `${upstream.url}/status`,
      LIFELINE_HEALTH_INTERVAL_MS: '300',
    });
    const line = await eventually(
      () =>
        Promise.resolve(
          service.lines.map((l) => JSON.parse(l) as { msg?: string; trace_id?: string }).find((l) => l.msg === 'polled upstream'),
        ),
      (l) => l?.trace_id !== undefined,
    );
    const traceId = line?.trace_id ?? '';
    const response = await eventually(
      () => fetch(`${stack.queryUrl}/api/traces/${traceId}`).then((r) => r.json() as Promise<{ data: JaegerTrace[] | null }>),
      (body) => (body.data?.length ?? 0) > 0,
    );
    expect(response.data?.[0]?.spans.some((s) => s.operationName === 'tick poller')).toBe(true);
  });

  it('a block past two intervals: the verdict the probes gave meanwhile is in Jaeger, saying where, linked to the watchdog span', async () => {
    // The block begins once the probe server is up (a block before it fails no probe: no verdict).
    await example('test/fixtures/blocking-app.mjs', 'e2e-blocked-verdict', {
      BLOCK: 'busy',
      BLOCK_AFTER_MS: '3000',
      BLOCK_MS: '3000',
      LIFELINE_HEALTH_INTERVAL_MS: '1000',
      LIFELINE_WATCHDOG_THRESHOLD_MS: '300',
    });
    const traces = await eventually(
      () =>
        findTraces(
          stack.queryUrl,
          'e2e-blocked-verdict',
          {
            'lifeline.event_loop.blocked_in': `crunchReport (${join(ROOT, 'test/fixtures/blocking-app.mjs')}:${String(blockingLine(join(ROOT, 'test/fixtures/blocking-app.mjs'), 'crunchReport'))})`,
          },
          'health verdict: healthcheck',
        ),
      (t) => t.length > 0,
    );
    const verdict = spansOf(traces).find((s) => s.operationName === 'health verdict: healthcheck') as JaegerSpan;
    expect(tag(verdict, 'otel.status_code')).toBe('ERROR');
    expect(Number(tag(verdict, 'lifeline.event_loop.blocked_ms'))).toBeGreaterThanOrEqual(2_000);
    expect(String(tag(verdict, 'otel.status_description'))).toMatch(
      /^unhealthy: healthcheck \(event loop blocked for \d+\.\d s in crunchReport/,
    );
    const watchdogSpans = await findTraces(
      stack.queryUrl,
      'e2e-blocked-verdict',
      { 'lifeline.event_loop.ongoing': 'true' },
      'event loop blocked',
    );
    const detected = spansOf(watchdogSpans).find((s) => s.operationName === 'event loop blocked');
    expect(verdict.references.map((r) => r.spanID)).toContain(detected?.spanID);
  });

  // Each way a loop blocks, found in Jaeger by the function that blocked it. Outside JavaScript the
  // thread cannot be paused: the span of the whole block names the caller, caught when it returns.
  it.each([
    ['busy', 'crunchReport', true],
    ['regex', 'matchHeader', true],
    ['atomics', 'waitForLock', true],
    ['fs', 'readSpool', false],
    ['forever', 'spinForever', true],
  ])(
    'a blocked event loop (%s): the watchdog span is found in Jaeger by the blocking function %s, with the stack, linked to the trace it blocked',
    async (block, fn, atDetection) => {
      const service = await example('test/fixtures/blocking-app.mjs', `e2e-blocked-${block}`, {
        BLOCK: block,
        BLOCK_MS: '1500',
        REGEX_LENGTH: '25',
        LIFELINE_WATCHDOG_THRESHOLD_MS: '300',
      });
      const traces = await eventually(
        () =>
          findTraces(
            stack.queryUrl,
            `e2e-blocked-${block}`,
            { 'code.function.name': fn, 'lifeline.event_loop.ongoing': String(atDetection) },
            'event loop blocked',
          ),
        (t) => t.length > 0,
      );
      // Blocked until killed: the span was in Jaeger while the loop was still stuck.
      if (block === 'forever') await service.kill('SIGKILL');
      const span = spansOf(traces).find((s) => s.operationName === 'event loop blocked') as JaegerSpan;
      expect(tag(span, 'otel.status_code')).toBe('ERROR');
      expect(tag(span, 'code.file.path')).toBe(join(ROOT, 'test/fixtures/blocking-app.mjs'));
      expect(Number(tag(span, 'lifeline.event_loop.blocked_ms'))).toBeGreaterThanOrEqual(300);
      expect(JSON.stringify(span.logs)).toContain(`at ${fn} (`);
      const appTrace = await eventually(
        () =>
          Promise.resolve(
            (JSON.parse(service.lines.find((l) => l.includes('"blockStartedAt"')) ?? '{}') as { blockTraceId?: string }).blockTraceId,
          ),
        (id) => id !== undefined,
      );
      expect(span.references.map((r) => r.traceID)).toContain(appTrace);
    },
  );
  it('SIGTERM during a stuck request of a zero-code service: its snapshot is in Jaeger, read back after the process exited', async () => {
    const service = await example('test/fixtures/stuck-service.mjs', 'e2e-sigterm', { LIFELINE_STUCK_AFTER_MS: '600000' });
    const { port } = JSON.parse(service.lines.find((line) => line.includes('"port"')) ?? '{}') as { port?: number };
    const controller = new AbortController();
    const answer = fetch(`http://127.0.0.1:${String(port)}/never`, { signal: controller.signal }).catch(() => undefined);
    try {
      await eventually(
        () => Promise.resolve(service.stdout()),
        (out) => out.includes('"started":"/never"'),
        20_000,
      );
      await service.stop(); // SIGTERM, and the process has exited
      expect(await service.exited).toEqual({ code: null, signal: 'SIGTERM' });
      const traces = await eventually(
        () => findTraces(stack.queryUrl, 'e2e-sigterm', { 'lifeline.in_flight': 'true' }),
        (found) => found.some((t) => t.spans.some((s) => s.operationName.endsWith('at SIGTERM)'))),
      );
      const snapshot = traces.flatMap((t) => t.spans).find((s) => s.operationName.endsWith('at SIGTERM)')) as JaegerSpan;
      expect(snapshot.operationName).toMatch(/^GET .*\(in flight, \d+ s, no deadline, at SIGTERM\)$/);
      expect(tag(snapshot, 'otel.status_code')).toBe('ERROR');
      expect(tag(snapshot, 'code.file.path')).toBe(join(ROOT, 'test/fixtures/stuck-service.mjs'));
    } finally {
      controller.abort();
      await answer;
    }
  });
});
