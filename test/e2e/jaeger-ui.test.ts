import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalStack, type LocalStack } from '../../otel-collector/local-stack.mjs';
import { eventually, findTraces } from '../support/jaeger.js';
import { ROOT, stopChild } from '../support/node.js';

// What a person sees in the real Jaeger UI (jaeger-ui v1.76.0, the UI of the Jaeger v2.13 the stack
// builds) for the stuck-dependency example, in headless Chromium: the documented searches (README, docs/diagnostics.md), performed
// as a user would, and what they list. Screenshots go to test-results/jaeger-ui/.
const SERVICE = 'e2e-ui';
/** A service under register mode with no lifeline code: no component, so no verdict, ever. */
const ZERO_CODE = 'e2e-zero-code';
const RESULTS = join(ROOT, 'test-results', 'jaeger-ui');

/** A built jaeger-ui: JAEGER_UI_ASSETS_PATH, else the one beside the repository (../shared/jaeger-ui). */
function uiAssets(): string {
  const candidates = [
    process.env.JAEGER_UI_ASSETS_PATH,
    join(ROOT, '..', 'shared', 'jaeger-ui', 'build-v1.76.0'),
    '/work/shared/jaeger-ui/build-v1.76.0',
  ].filter((p): p is string => p !== undefined && p !== '');
  const found = candidates.find((p) => existsSync(join(p, 'index.html')));
  if (found === undefined)
    throw new Error(`no built Jaeger UI: set JAEGER_UI_ASSETS_PATH to a jaeger-ui build folder (looked in ${candidates.join(', ')})`);
  return found;
}

function chromium(): string {
  const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(path)) throw new Error(`no Chromium at ${path}: install Debian's chromium package (.ci/run does), or set CHROMIUM_PATH`);
  return path;
}

let stack: LocalStack | undefined;
let app: ChildProcess | undefined;
let zeroCode: ChildProcess | undefined;
let stuckRequest: AbortController | undefined;
let browser: Browser | undefined;
let page: Page;

beforeAll(async () => {
  mkdirSync(RESULTS, { recursive: true });
  const started = await startLocalStack({ base: 29_000 + (process.pid % 300) * 10, uiAssets: uiAssets() });
  stack = started;
  app = spawn(process.execPath, ['--import', 'otel-lifeline/register', 'examples/stuck-dependency/server.mjs'], {
    cwd: ROOT,
    env: {
      ...process.env,
      OTEL_SERVICE_NAME: SERVICE,
      OTEL_EXPORTER_OTLP_ENDPOINT: started.otlpHttpEndpoint,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      LIFELINE_HEALTH_INTERVAL_MS: '1000',
      LIFELINE_PROBE_PORT: '0',
      PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stdout = app.stdout as NodeJS.ReadableStream;
  await new Promise((resolve) => createInterface({ input: stdout }).once('line', resolve));
  zeroCode = spawn(process.execPath, ['--import', 'otel-lifeline/register', 'test/fixtures/stuck-service.mjs'], {
    cwd: ROOT,
    env: {
      ...process.env,
      OTEL_SERVICE_NAME: ZERO_CODE,
      OTEL_EXPORTER_OTLP_ENDPOINT: started.otlpHttpEndpoint,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      LIFELINE_HEALTH_INTERVAL_MS: '1000',
      LIFELINE_STUCK_AFTER_MS: '2000',
      LIFELINE_PROBE_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const first = await new Promise<string>((resolve) =>
    createInterface({ input: zeroCode?.stdout as NodeJS.ReadableStream }).once('line', resolve),
  );
  const { port } = JSON.parse(first) as { port: number };
  // A request its handler never answers.
  stuckRequest = new AbortController();
  void fetch(`http://127.0.0.1:${String(port)}/never`, { signal: stuckRequest.signal }).catch(() => undefined);
  // What the UI will show is in Jaeger: the stuck tick's snapshot and the verdict.
  await eventually(
    () => findTraces(started.queryUrl, SERVICE, { 'lifeline.in_flight': 'true' }),
    (traces) => traces.some((t) => t.spans.some((s) => s.operationName.startsWith('wait for index lock (in flight'))),
  );
  await eventually(
    () => findTraces(started.queryUrl, SERVICE, { 'lifeline.health.component': 'indexer' }),
    (traces) => traces.some((t) => t.spans.some((s) => s.operationName.startsWith('health verdict'))),
  );
  await eventually(
    () => findTraces(started.queryUrl, ZERO_CODE, { 'lifeline.in_flight': 'true' }),
    (traces) => traces.some((t) => t.spans.some((s) => s.operationName.includes('(in flight'))),
  );
  const launched = await puppeteer.launch({
    executablePath: chromium(),
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    defaultViewport: { width: 1400, height: 1000 },
  });
  browser = launched;
  page = await launched.newPage();
}, 900_000);
afterAll(async () => {
  await browser?.close();
  stuckRequest?.abort();
  if (zeroCode !== undefined) await stopChild(zeroCode);
  if (app !== undefined) await stopChild(app);
  await stack?.stop();
});

/**
 * Runs `expression` in the page. As a string: this project's TypeScript has no DOM types (it runs
 * on Node), and the page's code is the browser's.
 */
async function inPage<T>(expression: string): Promise<T> {
  return (await page.evaluate(expression)) as T;
}

/** The text of every element matching `selector`, in document order. */
function texts(selector: string): Promise<string[]> {
  return inPage(`[...document.querySelectorAll(${JSON.stringify(selector)})].map((e) => e.textContent ?? '')`);
}

/** Clicks the first element matching `selector` whose text matches `text`; returns its index. */
async function clickText(selector: string, text: RegExp): Promise<number> {
  const index = (await texts(selector)).findIndex((t) => text.test(t));
  const element = (await page.$$(selector))[index];
  if (element === undefined) throw new Error(`nothing matching ${selector} reads ${String(text)}`);
  await element.click();
  return index;
}

/**
 * Opens a collapsed section (the UI's `role="switch"` headers) and waits until it says it is open:
 * a click that lands while the trace view is still laying out the detail just added is lost.
 */
async function openSwitch(selector: string): Promise<void> {
  const open = `document.querySelector(${JSON.stringify(selector)})?.getAttribute('aria-checked') === 'true'`;
  for (let attempt = 0; attempt < 5 && !(await inPage<boolean>(open)); attempt++) {
    await page.click(`${selector} strong`);
    await page.waitForFunction(open, { timeout: 1_000 }).catch(() => undefined);
  }
  await page.waitForFunction(open, { timeout: 1_000 });
}

/** The search page with the form filled as the docs say (the UI keeps its form in the URL). */
async function search(tags: Record<string, string>, service = SERVICE): Promise<{ title: string; text: string }[]> {
  await page.goto(`${stack?.uiUrl ?? ''}/search?service=${service}&lookback=1h&limit=20&tags=${encodeURIComponent(JSON.stringify(tags))}`, {
    waitUntil: 'networkidle0',
  });
  await page.waitForSelector('.ResultItem');
  const [titles, items] = await Promise.all([texts('.ResultItem .ResultItemTitle--title'), texts('.ResultItem')]);
  return titles.map((title, i) => ({ title, text: items[i] ?? '' }));
}

/** Opens the search result whose title matches, and waits for its trace view. */
async function open(title: RegExp): Promise<void> {
  await Promise.all([
    page.waitForNavigation({ waitUntil: 'networkidle0' }),
    clickText('.ResultItem a[class*=ResultItemTitle--item]', title),
  ]);
  await page.waitForSelector('.span-row');
}

/** The trace view's rows: name (service and operation) and whether it shows an error icon. */
function rows(): Promise<{ name: string; error: boolean }[]> {
  return inPage(
    `[...document.querySelectorAll('.span-row')].map((row) => ({ name: row.querySelector('.span-name')?.textContent ?? '', error: row.querySelector('.SpanBarRow--errorIcon') !== null }))`,
  );
}

/** Expands the row whose name matches; returns its detail's text. */
async function expand(name: RegExp): Promise<string> {
  await clickText('.span-row .span-name', name);
  await page.waitForSelector('.detail-row');
  return (await texts('.detail-row')).join('\n');
}

describe('the Jaeger UI, as a person reads it (stuck-dependency example)', () => {
  it("the documented first search lists the stuck component's trace with an error badge; its rows say in flight and how far past the deadline; it links to the verdict", async () => {
    const results = await search({ 'lifeline.in_flight': 'true' });
    await page.screenshot({ path: join(RESULTS, '1-search-in-flight.png') });
    const stuck = results.find((r) => /tick indexer \(in flight, (past deadline|\d+ s past deadline)\)/.test(r.title));
    expect(stuck, JSON.stringify(results)).toBeDefined();
    expect(stuck?.text).toMatch(/\d+ Errors?/); // the error badge
    await open(/tick indexer \(in flight/);
    const shown = await rows();
    await page.screenshot({ path: join(RESULTS, '2-stuck-trace.png') });
    expect(shown.map((r) => r.name)).toEqual([
      expect.stringMatching(/tick indexer \(in flight, .*past deadline\)$/),
      expect.stringMatching(/wait for index lock \(in flight, .*past deadline\)$/),
    ]);
    expect(shown.every((r) => r.error)).toBe(true);
    // The stuck call's own row: how late it is, and the function that waits.
    const call = await expand(/wait for index lock/);
    await page.screenshot({ path: join(RESULTS, '3-stuck-call.png'), fullPage: true });
    expect(call).toContain('lifeline.in_flight.overdue_ms');
    expect(call).toContain('rebuildIndex');
    // The root's references lead to the verdict.
    await expand(/tick indexer/);
    await page.waitForSelector('.AccordianReferences--header');
    await openSwitch('.AccordianReferences--header');
    await page.screenshot({ path: join(RESULTS, '4-stuck-trace-references.png'), fullPage: true });
    const links = await inPage<string[]>(
      `[...document.querySelectorAll('.AccordianReferences a[href*="/trace/"]')].map((a) => a.getAttribute('href'))`,
    );
    const verdicts = await findTraces(stack?.queryUrl ?? '', SERVICE, { 'lifeline.health.component': 'indexer' });
    const verdictTraces = verdicts.filter((t) => t.spans.some((s) => s.operationName.startsWith('health verdict'))).map((t) => t.traceID);
    expect(
      links.some((href) => verdictTraces.some((id) => href.includes(id))),
      `${JSON.stringify(links)} vs ${JSON.stringify(verdictTraces)}`,
    ).toBe(true);
  });

  it("Jaeger's own error search finds none of it (the docs say what to search instead)", async () => {
    const queryUrl = stack?.queryUrl ?? '';
    const counts = {
      errorTrue: (await findTraces(queryUrl, SERVICE, { error: 'true' })).length,
      statusError: (await findTraces(queryUrl, SERVICE, { 'otel.status_code': 'ERROR' })).length,
      inFlight: (await findTraces(queryUrl, SERVICE, { 'lifeline.in_flight': 'true' })).length,
    };
    console.log(
      `Jaeger tag search: error=true ${String(counts.errorTrue)} traces, otel.status_code=ERROR ${String(counts.statusError)}, lifeline.in_flight=true ${String(counts.inFlight)}`,
    );
    expect(counts).toEqual({ errorTrue: 0, statusError: 0, inFlight: expect.any(Number) as number });
    expect(counts.inFlight).toBeGreaterThan(0);
  });

  it("the verdict is found by the component's name, reads its summary first, and links to the stuck trace", async () => {
    const results = await search({ 'lifeline.health.component': 'indexer' });
    await page.screenshot({ path: join(RESULTS, '5-search-component.png') });
    const verdict = results.find((r) => /health verdict: indexer/.test(r.title));
    expect(verdict, JSON.stringify(results.map((r) => r.title))).toBeDefined();
    expect(verdict?.text).toMatch(/\d+ Errors?/);
    await open(/health verdict: indexer/);
    expect((await rows()).map((r) => r.name)).toEqual([
      expect.stringMatching(/health verdict: indexer$/),
      expect.stringMatching(/indexer unhealthy$/),
    ]);
    const detail = await expand(/health verdict: indexer/);
    // Its event (the UI's "Logs"), opened, then the event itself.
    await openSwitch('.detail-row .AccordianLogs--header');
    await page.waitForSelector('.AccordianLogs--content');
    // The event itself, opened: a table of its attributes.
    await openSwitch('.AccordianLogs--content .AccordianKeyValues--header');
    const text = (await texts('.detail-row')).join('\n');
    await page.screenshot({ path: join(RESULTS, '6-verdict.png'), fullPage: true });
    expect(detail).toContain('unhealthy: indexer');
    expect(text).toMatch(
      /indexer \(liveness\) is unhealthy:\s*wait for index lock \(in flight \d+\.\d s, \d+\.\d s past its deadline\) from rebuildIndex/,
    );
    expect(text.indexOf('lifeline.diagnostic.overview')).toBeLessThan(text.indexOf('lifeline.diagnostic.span_tree'));
    // The component's row links to the stuck trace.
    await expand(/indexer unhealthy/);
    await openSwitch('.detail-row:last-of-type .AccordianReferences--header');
    const links = await inPage<string[]>(
      `[...document.querySelectorAll('.AccordianReferences a[href*="/trace/"]')].map((a) => a.getAttribute('href'))`,
    );
    await page.screenshot({ path: join(RESULTS, '7-verdict-component.png'), fullPage: true });
    const stuck = await findTraces(stack?.queryUrl ?? '', SERVICE, {
      'lifeline.in_flight': 'true',
      'lifeline.health.component': 'indexer',
    });
    expect(
      links.some((href) => stuck.some((t) => href.includes(t.traceID))),
      `${JSON.stringify(links)} vs ${JSON.stringify(stuck.map((t) => t.traceID))}`,
    ).toBe(true);
  });
});

describe('the Jaeger UI, as a person reads it (a zero-code service with a stuck request)', () => {
  it('the documented first search lists the stuck request with an error badge; its row says how long it has been in flight, with no deadline', async () => {
    const results = await search({ 'lifeline.in_flight': 'true' }, ZERO_CODE);
    await page.screenshot({ path: join(RESULTS, '8-zero-code-search.png') });
    const stuck = results.find((r) => /GET .*\(in flight, \d+ s, no deadline\)/.test(r.title));
    expect(stuck, JSON.stringify(results.map((r) => r.title))).toBeDefined();
    expect(stuck?.text).toMatch(/\d+ Errors?/); // the error badge
    await open(/\(in flight, \d+ s, no deadline\)/);
    const shown = await rows();
    await page.screenshot({ path: join(RESULTS, '9-zero-code-trace.png') });
    expect(shown[0]?.name).toMatch(/GET .*\(in flight, \d+ s, no deadline\)$/);
    expect(shown[0]?.error).toBe(true);
    const detail = await expand(/\(in flight, \d+ s, no deadline\)/);
    expect(detail).toContain('lifeline.in_flight.age_ms');
  });
});
