import { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler, type Sampler } from '@opentelemetry/sdk-trace';
import type { Logger } from '../log/index.js';

const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

/**
 * The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name, read as the OpenTelemetry
 * SDK reads them: unset is `parentbased_always_on`; an unknown name, or a ratio that is not a
 * number from 0 to 1, is warned about and replaced by the default (the ratio by 1), never fatal.
 * Where it differs: surrounding spaces are ignored, an unset or blank ratio is 1 without a warning,
 * and a ratio longer than 32 characters is refused.
 */
export function samplerFromEnv(env: NodeJS.ProcessEnv, logger: Logger): Sampler {
  const name = env.OTEL_TRACES_SAMPLER?.trim() || 'parentbased_always_on';
  if (!SAMPLERS.includes(name)) {
    logger.warn(
      { variable: 'OTEL_TRACES_SAMPLER', value: name.slice(0, 64) },
      `lifeline: unknown OTEL_TRACES_SAMPLER, using parentbased_always_on (expected one of ${SAMPLERS.join(', ')})`,
    );
    return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
  const root = name.endsWith('always_on')
    ? new AlwaysOnSampler()
    : name.endsWith('always_off')
      ? new AlwaysOffSampler()
      : new TraceIdRatioBasedSampler(ratioFromEnv(env, logger));
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

function ratioFromEnv(env: NodeJS.ProcessEnv, logger: Logger): number {
  const raw = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  if (raw === undefined || raw === '') return 1;
  // Read as the SDK reads it (Number: `0.01`, `1e-2`), once bounded: a ratio needs no more characters.
  const ratio = raw.length <= 32 ? Number(raw) : Number.NaN;
  if (ratio >= 0 && ratio <= 1) return ratio;
  logger.warn(
    { variable: 'OTEL_TRACES_SAMPLER_ARG', value: raw.slice(0, 32) },
    'lifeline: invalid OTEL_TRACES_SAMPLER_ARG, using 1 (expected a number from 0 to 1)',
  );
  return 1;
}
