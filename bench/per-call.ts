/**
 * bench/per-call: lifeline's own work for one undici call, with no network, beside the work a
 * hand-written deadline adds to the same call. A dispatch that answers on the next microtask
 * stands in for undici's Agent, so what is measured is only what sits around it: the deadline
 * interceptor (policy, handler wrapper, header, the deadline's timer) and `withTimeout`, against
 * `AbortSignal.timeout(ms)` with the abort listener fetch adds to it (and removes at the end).
 * Calls run 16 per turn of the event loop, as a service's concurrent calls do. End-to-end figures
 * (bench/deadline, bench/service) carry these costs plus the transport's, whose noise on this
 * machine (±5 % of ~200 µs per call) is larger than what is measured here.
 * Run: npm run bench:per-call
 */
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import type { Dispatcher } from 'undici';
import { deadlineInterceptor, withTimeout } from 'otel-lifeline';
import { fixed, spread, summarize, table, target } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const CALLS = quick ? 100_000 : 400_000;
const ROUNDS = quick ? 5 : 9;
const PER_TURN = 16;

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const controller: Dispatcher.DispatchController = {
  aborted: false,
  paused: false,
  reason: null,
  abort() {
    // answered at once: nothing to abort
  },
  pause() {
    // nothing to pause
  },
  resume() {
    // nothing to resume
  },
};
const body = Buffer.from('ok');
/** Answers every request on the next microtask: a request, its head, one chunk, its end. */
const answer: Dispatcher.Dispatch = (_opts, handler) => {
  queueMicrotask(() => {
    handler.onRequestStart?.(controller, {});
    handler.onResponseStart?.(controller, 200, {}, 'OK');
    handler.onResponseData?.(controller, body);
    handler.onResponseEnd?.(controller, {});
  });
  return true;
};
const withDeadlines = deadlineInterceptor()(answer);
const opts: Dispatcher.DispatchOptions = { origin: 'http://127.0.0.1:8080', path: '/items', method: 'GET', headers: { accept: '*/*' } };
const handler = (): Dispatcher.DispatchHandler => ({
  onRequestStart() {
    // the caller's
  },
  onResponseStart() {
    // the caller's
  },
  onResponseData() {
    // the caller's
  },
  onResponseEnd() {
    // the caller's
  },
  onResponseError() {
    // the caller's
  },
});
const onAbort = (): void => {
  // fetch's listener: aborts the request
};

type Variant = { name: string; call: () => void; underDeadline?: boolean };
const variants: Variant[] = [
  { name: 'no deadline (the dispatch alone)', call: () => answer(opts, handler()) },
  {
    name: 'by hand: AbortSignal.timeout(30 s) per call, its abort listener added and removed',
    call: () => {
      const signal = AbortSignal.timeout(30_000);
      signal.addEventListener('abort', onAbort, { once: true });
      const inner = handler();
      answer(opts, {
        ...inner,
        onResponseEnd(c, trailers) {
          signal.removeEventListener('abort', onAbort);
          inner.onResponseEnd?.(c, trailers);
        },
      });
    },
  },
  {
    name: 'lifeline: withTimeout(30 s) per call, through the deadline interceptor',
    call: () => withTimeout(30_000, () => withDeadlines(opts, handler())),
  },
  {
    name: "lifeline: calls under their request's deadline, through the deadline interceptor",
    call: () => withDeadlines(opts, handler()),
    underDeadline: true,
  },
];

async function run(variant: Variant, calls: number): Promise<number> {
  const turns = async (): Promise<void> => {
    for (let i = 0; i < calls; i += PER_TURN) {
      for (let j = 0; j < PER_TURN; j++) variant.call();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  // Each variant pays for its own garbage only: collected before it starts, and within its run.
  (globalThis as { gc?: () => void }).gc?.();
  const before = process.cpuUsage();
  await (variant.underDeadline === true ? withTimeout(600_000, turns) : turns());
  const used = process.cpuUsage(before);
  return ((used.user + used.system) * 1_000) / calls; // ns per call
}

for (const variant of variants) await run(variant, CALLS / 4); // warm up every path first
const nsPerCall = new Map<string, number[]>(variants.map((v) => [v.name, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) nsPerCall.get(variant.name)?.push(await run(variant, CALLS));
}

const base = summarize(nsPerCall.get(variants[0]?.name ?? '') ?? []).median;
console.log(
  `## CPU per undici call around the dispatch, no network: ${ROUNDS} rounds × ${CALLS.toLocaleString('en-US')} calls, ${PER_TURN} per turn of the loop (ns)\n`,
);
table(
  ['variant', 'ns per call, median (min–max)', 'added to the dispatch alone (median)'],
  variants.map((v) => {
    const sample = summarize(nsPerCall.get(v.name) ?? []);
    return [v.name, spread(sample, 0), v === variants[0] ? '—' : fixed(sample.median - base, 0)];
  }),
);
const added = (index: number): number => summarize(nsPerCall.get(variants[index]?.name ?? '') ?? []).median - base;
const byHand = added(1);
for (const [index, what] of [
  [2, 'withTimeout per call'],
  [3, "calls under their request's deadline"],
] as const) {
  target({
    figure: `lifeline's own work per undici call (${what}) ÷ a hand-written AbortSignal.timeout's (ns added to the dispatch)`,
    measured: `${fixed(added(index), 0)} vs ${fixed(byHand, 0)} ns (${fixed(added(index) / byHand, 2)}×)`,
    target: '≤ 1.0×',
    met: added(index) <= byHand,
    note: 'the span attributes, propagation and the transport are measured end to end by bench/deadline and bench/service',
  });
}
