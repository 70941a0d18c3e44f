import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as received over OTLP/HTTP JSON, flattened for assertions. */
export interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  kind: number;
  startMs: number;
  endMs: number;
  statusCode: number;
  statusMessage: string;
  attributes: Record<string, string | number | boolean>;
  events: { name: string; attributes: Record<string, string | number | boolean> }[];
  links: { traceId: string; spanId: string; attributes: Record<string, string | number | boolean> }[];
}

interface OtlpValue {
  arrayValue?: unknown;
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  status?: { code?: number; message?: string };
  attributes?: OtlpAttribute[];
  events?: { name: string; attributes?: OtlpAttribute[] }[];
  links?: { traceId: string; spanId: string; attributes?: OtlpAttribute[] }[];
}
interface OtlpRequest {
  resourceSpans?: { resource?: { attributes?: OtlpAttribute[] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[];
}

/**
 * A minimal OTLP/HTTP JSON trace receiver on loopback: services under test export to it with the
 * real OTLP exporter (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), so their spans can be asserted on.
 * `port` 0 picks a free one; a given port lets a test start the receiver after the service (a collector coming up late).
 * `answerAfterMs` makes every export take that long (a slow collector). `requests` records when each
 * export came, by path (`/v1/metrics`…).
 */
export async function otlpReceiver(
  port = 0,
  options: { answerAfterMs?: number } = {},
): Promise<{
  endpoint: string;
  spans: ReceivedSpan[];
  requests: Map<string, number[]>;
  waitFor: (predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number) => Promise<ReceivedSpan[]>;
  close: () => Promise<void>;
}> {
  const spans: ReceivedSpan[] = [];
  const requests = new Map<string, number[]>();
  const server = createServer((req, res) => {
    const path = req.url ?? '';
    const times = requests.get(path) ?? [];
    times.push(Date.now());
    requests.set(path, times);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces') spans.push(...flatten(JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpRequest));
      const answer = (): void => {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      };
      if (options.answerAfterMs === undefined) answer();
      else setTimeout(answer, options.answerAfterMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const listening = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${String(listening)}`,
    spans,
    requests,
    async waitFor(predicate, timeoutMs = 15_000) {
      const until = Date.now() + timeoutMs;
      while (!predicate(spans)) {
        if (Date.now() > until)
          throw new Error(`spans did not arrive in time; have: ${spans.map((s) => `${s.service}:${s.name}`).join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return spans;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

function flatten(request: OtlpRequest): ReceivedSpan[] {
  const result: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        result.push({
          service,
          name: span.name,
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? '',
          kind: span.kind,
          startMs: Number(BigInt(span.startTimeUnixNano) / 1_000_000n),
          endMs: Number(BigInt(span.endTimeUnixNano) / 1_000_000n),
          statusCode: span.status?.code ?? 0,
          statusMessage: span.status?.message ?? '',
          attributes: attributesOf(span.attributes),
          events: (span.events ?? []).map((event) => ({ name: event.name, attributes: attributesOf(event.attributes) })),
          links: (span.links ?? []).map((link) => ({
            traceId: link.traceId,
            spanId: link.spanId,
            attributes: attributesOf(link.attributes),
          })),
        });
      }
    }
  }
  return result;
}

function attributesOf(list: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  const result: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    const v =
      value.stringValue ??
      value.boolValue ??
      value.doubleValue ??
      (value.intValue === undefined ? undefined : Number(value.intValue)) ??
      (value.arrayValue === undefined ? undefined : JSON.stringify(value.arrayValue));
    if (v !== undefined) result[key] = v;
  }
  return result;
}
