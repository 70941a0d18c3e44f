import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCollectorTier, type CollectorTier } from '../../otel-collector/local-stack.mjs';
import { ROOT, stopChild } from '../support/node.js';
import { eventually, findTraces, type JaegerTrace } from '../support/jaeger.js';

// The collector tier as issue 17 asks: services → an agent (routes by trace ID) → 2 gateways (tail
// sampling: keep lifeline's evidence and ROUTINE_PERCENT of the rest) → Jaeger on Badger, on disk.
const PODS = 3;
const ROUTINE_REQUESTS = 300;
const ROUTINE_PERCENT = 10;
const DECISION_WAIT_S = 3;
// Below the ephemeral range, disjoint from the other e2e files' ports.
const BASE = 32_000 + (process.pid % 70) * 10;

let tier: CollectorTier;
let badgerDir: string;
const pods: { child: ChildProcess; port: number; aborted: Map<string, number> }[] = [];

/** VmRSS of a process in MiB, from /proc; 0 once it is gone (a gateway just killed). */
function rssMiB(pid: number | undefined): number {
  let status: string;
  try {
    status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
  } catch {
    return 0;
  }
  const line = status.split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(/\d+/.exec(line ?? '')?.[0] ?? 0) / 1024;
}

async function startPod(i: number): Promise<(typeof pods)[number]> {
  const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', 'test/fixtures/fleet-pod.mjs'], {
    cwd: ROOT,
    env: {
      ...process.env,
      OTEL_SERVICE_NAME: 'fleet',
      OTEL_RESOURCE_ATTRIBUTES: `service.instance.id=pod-${String(i)}`,
      OTEL_EXPORTER_OTLP_ENDPOINT: tier.otlpHttpEndpoint,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      LIFELINE_HEALTH_INTERVAL_MS: '300',
      LIFELINE_PROBE_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const pod = { child, port: 0, aborted: new Map<string, number>() };
  const ready = new Promise<void>((resolve) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      const message = JSON.parse(line) as { port?: number; aborted?: string };
      if (message.port !== undefined) {
        pod.port = message.port;
        resolve();
      }
      if (message.aborted !== undefined) pod.aborted.set(message.aborted, Date.now());
    });
  });
  pods.push(pod);
  await ready;
  return pod;
}

beforeAll(async () => {
  badgerDir = mkdtempSync(join(tmpdir(), 'lifeline-badger-'));
  tier = await startCollectorTier({ base: BASE, badgerDir, decisionWait: `${String(DECISION_WAIT_S)}s`, routinePercent: ROUTINE_PERCENT });
});
afterAll(async () => {
  await Promise.all(pods.map((pod) => stopChild(pod.child)));
  await tier.stop();
  rmSync(badgerDir, { recursive: true, force: true });
});

describe('the collector tier: agent → 2 gateways (tail sampling) → Jaeger on Badger', () => {
  it('keeps every evidence trace whole on one gateway, samples routine traces at the ratio, survives a gateway lost mid-run, stays bounded in memory', async () => {
    for (let i = 0; i < PODS; i++) await startPod(i);
    const rss = { agent: 0, gateways: 0 };
    const sampleRss = setInterval(() => {
      rss.agent = Math.max(rss.agent, rssMiB(tier.agent.child.pid));
      for (const gateway of tier.gateways) rss.gateways = Math.max(rss.gateways, rssMiB(gateway.child.pid));
    }, 250);
    try {
      // Routine request traces, while both gateways are up.
      for (let i = 0; i < ROUTINE_REQUESTS; i++) {
        const pod = pods[i % PODS];
        await (await fetch(`http://127.0.0.1:${String(pod?.port)}/routine`)).text();
      }
      // Their decisions made, and evidence made meanwhile that no kill touches: it must all arrive.
      await new Promise((resolve) => setTimeout(resolve, DECISION_WAIT_S * 1_000 + 8_000));
      // A gateway lost mid-run, and back: the agent keeps routing its share of traces to it meanwhile.
      const gateway = tier.gateways[1];
      if (gateway === undefined) throw new Error('no second gateway');
      const outageStart = Date.now();
      await gateway.kill();
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      await gateway.start();
      const outageEnd = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 4_000)); // more evidence with both up
      const stoppedAt = Date.now();
      await Promise.all(pods.map((pod) => stopChild(pod.child, 'SIGTERM'))); // each flushes on the way out
      clearInterval(sampleRss);

      // Calls aborted in a pod's last second may still have their tick span in flight when it exits.
      const produced = pods.flatMap((pod) => [...pod.aborted]).filter(([, at]) => at < stoppedAt - 1_000);
      expect(produced.length).toBeGreaterThan(10);
      // Every aborted call's trace: in Jaeger, whole (tick span and the call; no span missing its parent).
      const fetchTrace = async (id: string): Promise<JaegerTrace | undefined> => {
        const response = await fetch(`${tier.queryUrl}/api/traces/${id}`);
        return response.ok ? ((await response.json()) as { data: JaegerTrace[] }).data[0] : undefined;
      };
      // What a killed gateway loses: its share of traces sent while it was down, and those it held
      // undecided when it died: aborted up to the decision wait (checked once a second), the
      // pods' and the agent's batching and a loaded machine's delays before the kill.
      const inOutage = (at: number): boolean => at >= outageStart - DECISION_WAIT_S * 1_000 - 4_000 && at <= outageEnd + 1_000;
      // Everything produced while both gateways were up arrives (decision wait, then Jaeger's batch).
      const lookUp = () => Promise.all(produced.map(async ([id, at]) => ({ id, at, trace: await fetchTrace(id) })));
      let settled = await lookUp();
      for (const until = Date.now() + 60_000; Date.now() < until && !settled.every((t) => t.trace !== undefined || inOutage(t.at));) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        settled = await lookUp();
      }
      const late = settled
        .filter((t) => t.trace === undefined && !inOutage(t.at))
        .map((t) => `${t.id} at ${String(t.at - outageStart)} ms from the outage's start (${String(outageEnd - outageStart)} ms long)`);
      expect(late).toEqual([]);
      const missing = settled.filter((t) => t.trace === undefined);
      for (const { trace } of settled) {
        if (trace === undefined) continue;
        const names = trace.spans.map((s) => s.operationName);
        expect(names).toContain('tick poller');
        expect(names).toContain('GET');
        // Whole: every span's parent is in the trace. (Jaeger also warns of clock skew here: the
        // upstream's server span ends after the call it answers was aborted, which is right.)
        const ids = new Set(trace.spans.map((s) => s.spanID));
        expect(trace.spans.filter((s) => s.references.some((r) => r.refType === 'CHILD_OF' && !ids.has(r.spanID)))).toEqual([]);
        expect(trace.spans.flatMap((s) => s.warnings ?? []).filter((w) => /parent/i.test(w))).toEqual([]);
      }
      const duringOutage = produced.filter(([, at]) => inOutage(at)).length;
      const lostShare = duringOutage === 0 ? 0 : missing.length / duringOutage;
      const lostBeforeKill = missing.filter((t) => t.at < outageStart).length;
      console.log(
        `topology: ${String(produced.length)} aborted-call traces, ${String(duringOutage)} of them from the decision wait before gateway 2 was killed to its restart ${String(outageEnd - outageStart)} ms later, ${String(missing.length)} lost (${(lostShare * 100).toFixed(0)} % of those; ${String(lostBeforeKill)} aborted before the kill, held undecided by the gateway); peak RSS agent ${rss.agent.toFixed(0)} MiB, gateways ${rss.gateways.toFixed(0)} MiB`,
      );

      // Snapshots of the stuck component's work in flight, from every pod (each pod's verdict
      // snapshots its stuck tick once, in the tick's own trace).
      const instances = async (): Promise<Set<unknown>> => {
        const traces = await findTraces(
          tier.queryUrl,
          'fleet',
          { 'lifeline.health.component': 'indexer', 'lifeline.in_flight': 'true' },
          undefined,
          500,
        );
        return new Set(
          traces.flatMap((t) =>
            Object.values(t.processes).map(
              (p) => (p as { tags?: { key: string; value: unknown }[] }).tags?.find((tg) => tg.key === 'service.instance.id')?.value,
            ),
          ),
        );
      };
      const found = await eventually(instances, (pods) => pods.size >= PODS);
      expect(found.size).toBe(PODS);

      // Routine: 10 % of 300 is 30 on average; outside 10–60 has a chance below 1e-5.
      const routine = await findTraces(tier.queryUrl, 'fleet', { 'url.path': '/routine' }, undefined, 1_000);
      console.log(
        `topology: ${String(routine.length)} of ${String(ROUTINE_REQUESTS)} routine request traces kept at ${String(ROUTINE_PERCENT)} %`,
      );
      expect(routine.length).toBeGreaterThanOrEqual(10);
      expect(routine.length).toBeLessThanOrEqual(60);

      // Memory stays within each tier's memory_limiter (agent 256 MiB, gateways 512 MiB) and their Go runtime.
      expect(rss.agent).toBeLessThan(256 + 64);
      expect(rss.gateways).toBeLessThan(512 + 128);
    } finally {
      clearInterval(sampleRss);
    }
  });
});
