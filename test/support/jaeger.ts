/** Jaeger's query API (v1.76 = v2.13 `/api/...` JSON), as the e2e tests and the demo read it. */

export interface JaegerTag {
  key: string;
  type: string;
  value: unknown;
}
export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: string; traceID: string; spanID: string }[];
  /** What Jaeger's adjusters found wrong (an unknown parent, say). */
  warnings?: string[] | null;
  startTime: number;
  duration: number;
  tags: JaegerTag[];
  logs: { timestamp: number; fields: JaegerTag[] }[];
  processID: string;
}
export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string }>;
}

export function tag(span: JaegerSpan, key: string): unknown {
  return span.tags.find((t) => t.key === key)?.value;
}

export function parentOf(span: JaegerSpan): string | undefined {
  return span.references.find((r) => r.refType === 'CHILD_OF')?.spanID;
}

/** Traces of `service` whose spans match `tags` (values compared as strings by Jaeger). */
export async function findTraces(
  queryUrl: string,
  service: string,
  tags: Record<string, string> = {},
  operation?: string,
  limit = 50,
): Promise<JaegerTrace[]> {
  const params = new URLSearchParams({
    service,
    limit: String(limit),
    tags: JSON.stringify(tags),
    start: String((Date.now() - 3_600_000) * 1_000),
    end: String((Date.now() + 60_000) * 1_000),
  });
  if (operation !== undefined) params.set('operation', operation);
  const response = await fetch(`${queryUrl}/api/traces?${params.toString()}`);
  if (!response.ok) throw new Error(`Jaeger answered ${response.status}`);
  return ((await response.json()) as { data: JaegerTrace[] | null }).data ?? [];
}

/** Polls `read` until `accept` likes the answer (Jaeger shows spans after the batch timeouts). */
export async function eventually<T>(read: () => Promise<T>, accept: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > until) throw new Error(`not seen in Jaeger within ${timeoutMs} ms: ${JSON.stringify(value).slice(0, 500)}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}
