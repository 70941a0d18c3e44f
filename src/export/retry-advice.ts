import type { ExportResult } from '@opentelemetry/core';

/** What a failed export says about another try: whether one is worth it, and after how long if the collector said. */
export interface RetryAdvice {
  retryable: boolean;
  /** The delay the collector asked for (gRPC `RetryInfo`), in ms. */
  afterMs?: number;
}

// HTTP statuses worth another try (the OTLP specification's list). lifeline's OTLP/HTTP exporter
// gives the status and what Retry-After asked for (`retryAfterMs`); OpenTelemetry's own give neither
// for these (they retry themselves within their timeout): an error without a numeric code is retried.
const RETRYABLE_HTTP = new Set([429, 502, 503, 504]);
// gRPC status codes worth another try (the OTLP specification's list): CANCELLED, DEADLINE_EXCEEDED,
// ABORTED, OUT_OF_RANGE, UNAVAILABLE (a collector not listening), DATA_LOSS; RESOURCE_EXHAUSTED only
// when the collector says when (RetryInfo).
const RETRYABLE_GRPC = new Set([1, 4, 10, 11, 14, 15]);
const RESOURCE_EXHAUSTED = 8;

/**
 * Reads a failed export's result. No numeric code: the collector was not reached (refused, reset,
 * timed out), or answered a retryable HTTP status; a code of 100 or more is an HTTP status (with
 * its Retry-After, from lifeline's exporter); below, a gRPC status, whose trailers may carry a
 * `google.rpc.RetryInfo` (the OTLP/gRPC way to say when).
 */
export function retryAdvice(result: ExportResult): RetryAdvice {
  const error = result.error as { code?: unknown; metadata?: unknown; retryAfterMs?: unknown; retryable?: unknown } | undefined;
  if (error?.retryable === false) return { retryable: false }; // lifeline's exporter knows another try is futile
  const code = error?.code;
  if (typeof code !== 'number') return { retryable: true };
  if (code >= 100) {
    if (!RETRYABLE_HTTP.has(code)) return { retryable: false };
    const afterMs = error?.retryAfterMs;
    return typeof afterMs === 'number' && Number.isFinite(afterMs) ? { retryable: true, afterMs } : { retryable: true };
  }
  const afterMs = grpcRetryDelayMs(error?.metadata);
  if (afterMs !== undefined && (RETRYABLE_GRPC.has(code) || code === RESOURCE_EXHAUSTED)) return { retryable: true, afterMs };
  return { retryable: RETRYABLE_GRPC.has(code) };
}

/** The retry delay in a grpc-js `Metadata`'s `grpc-status-details-bin` (a `google.rpc.Status`), if any. */
function grpcRetryDelayMs(metadata: unknown): number | undefined {
  const get = (metadata as { get?: unknown } | undefined)?.get;
  if (typeof get !== 'function') return undefined;
  const values: unknown = get.call(metadata, 'grpc-status-details-bin');
  if (!Array.isArray(values)) return undefined;
  for (const value of values) {
    if (!(value instanceof Uint8Array)) continue;
    const delay = retryInfoDelayMs(value);
    if (delay !== undefined) return delay;
  }
  return undefined;
}

const RETRY_INFO = '/google.rpc.RetryInfo';

/** google.rpc.Status { repeated Any details = 3 }; Any { type_url = 1; value = 2 }; RetryInfo { Duration retry_delay = 1 }. */
function retryInfoDelayMs(status: Uint8Array): number | undefined {
  for (const detail of protoFields(status) ?? []) {
    if (detail.field !== 3 || typeof detail.value === 'number') continue;
    const any = protoFields(detail.value) ?? [];
    const type = any.find((field) => field.field === 1)?.value;
    const value = any.find((field) => field.field === 2)?.value;
    if (typeof type === 'number' || type === undefined || typeof value === 'number' || value === undefined) continue;
    if (!Buffer.from(type.buffer, type.byteOffset, type.byteLength).toString('utf8').endsWith(RETRY_INFO)) continue;
    const delay = protoFields(value)?.find((field) => field.field === 1)?.value;
    if (delay === undefined || typeof delay === 'number') return 0; // no delay given: at once
    // Duration { int64 seconds = 1; int32 nanos = 2 }; a negative one is read as a huge one, then capped.
    const duration = protoFields(delay) ?? [];
    const seconds = duration.find((field) => field.field === 1)?.value;
    const nanos = duration.find((field) => field.field === 2)?.value;
    const ms =
      (typeof seconds === 'number' ? seconds * 1_000 : 0) + (typeof nanos === 'number' && nanos < 1e9 ? Math.floor(nanos / 1e6) : 0);
    return Number.isFinite(ms) ? ms : undefined;
  }
  return undefined;
}

interface ProtoField {
  field: number;
  value: number | Uint8Array;
}

/** A protobuf message's fields, varints and length-delimited ones (others skipped); `undefined` if malformed. */
function protoFields(bytes: Uint8Array): ProtoField[] | undefined {
  const fields: ProtoField[] = [];
  let at = 0;
  const varint = (): number | undefined => {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const byte = bytes[at++];
      if (byte === undefined) return undefined;
      value += (byte & 0x7f) * scale;
      scale *= 128;
      if (byte < 0x80) return value;
    }
    return undefined;
  };
  while (at < bytes.length) {
    const key = varint();
    if (key === undefined) return undefined;
    const field = Math.floor(key / 8);
    switch (key % 8) {
      case 0: {
        const value = varint();
        if (value === undefined) return undefined;
        fields.push({ field, value });
        break;
      }
      case 2: {
        const length = varint();
        if (length === undefined || at + length > bytes.length) return undefined;
        fields.push({ field, value: bytes.subarray(at, at + length) });
        at += length;
        break;
      }
      case 1:
        at += 8;
        break;
      case 5:
        at += 4;
        break;
      default:
        return undefined;
    }
  }
  return at === bytes.length ? fields : undefined;
}
