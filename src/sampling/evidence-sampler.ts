import type { Attributes, Context, Link, SpanKind } from '@opentelemetry/api';
import { createAlwaysRecordSampler, SamplingDecision, type Sampler, type SamplingResult } from '@opentelemetry/sdk-trace';
import { isEvidenceAtStart } from './evidence.js';

const SAMPLED: SamplingResult = { decision: SamplingDecision.RECORD_AND_SAMPLED };

/**
 * A sampler that keeps the evidence whatever `sampler` decides (e.g. `parentbased_traceidratio`
 * at 1 %). Spans `sampler` drops are recorded all the same, not sampled (OpenTelemetry's
 * AlwaysRecord sampler): lifeline's processors see them, so a stuck call is still tracked in flight
 * and explained by the verdict, and a call's deadline is still recorded; only the
 * {@link EvidenceSpanProcessor} decides whether they are exported. lifeline's own evidence spans
 * (verdicts, their component spans, snapshots of spans in flight, a blocked event loop) are always
 * sampled. A routine trace the sampler dropped costs what a sampled one does, minus its export.
 * @example
 * ```ts
 * const sdk = new NodeSDK({
 *   sampler: new EvidenceSampler(new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.01) })),
 *   spanProcessors: [...parts.spanProcessors, new EvidenceSpanProcessor([new BatchSpanProcessor({ exporter })])],
 * });
 * ```
 */
export class EvidenceSampler implements Sampler {
  readonly #recording: Sampler;
  readonly #description: string;

  constructor(sampler: Sampler) {
    this.#recording = createAlwaysRecordSampler(sampler);
    this.#description = `EvidenceSampler{${sampler.toString()}}`;
  }

  /** Samples lifeline's evidence spans; any other span as `sampler` decides, recorded even when that drops it. */
  shouldSample(context: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    if (isEvidenceAtStart(attributes)) return SAMPLED;
    return this.#recording.shouldSample(context, traceId, name, kind, attributes, links);
  }

  /** `EvidenceSampler{…}`, with the wrapped sampler's description inside. */
  toString(): string {
    return this.#description;
  }
}
