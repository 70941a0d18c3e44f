import { describe, expect, it } from 'vitest';
import type { Logger } from '../../src/index.js';
import { samplerFromEnv } from '../../src/sampling/index.js';

function read(env: NodeJS.ProcessEnv): { sampler: string; warnings: string[] } {
  const warnings: string[] = [];
  const logger: Logger = {
    warn: (_obj, msg) => warnings.push(msg),
    info: () => undefined,
    debug: () => undefined,
  };
  return { sampler: samplerFromEnv(env, logger).toString(), warnings };
}

describe('samplerFromEnv: OTEL_TRACES_SAMPLER and its ARG, as the OpenTelemetry SDK reads them', () => {
  it.each([
    [{}, 'ParentBased{root=AlwaysOnSampler'],
    [{ OTEL_TRACES_SAMPLER: 'always_off' }, 'AlwaysOffSampler'],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }, 'TraceIdRatioBased{0.25}'],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' }, 'ParentBased{root=TraceIdRatioBased{0.01}'],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }, 'ParentBased{root=AlwaysOffSampler'],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio' }, 'TraceIdRatioBased{1}'],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1e-2' }, 'TraceIdRatioBased{0.01}'],
  ])('%o → %s', (env, expected) => {
    const { sampler, warnings } = read(env);
    expect(sampler.startsWith(expected)).toBe(true);
    expect(warnings).toEqual([]);
  });

  it.each([
    [{ OTEL_TRACES_SAMPLER: 'ratio' }, 'ParentBased{root=AlwaysOnSampler', /unknown OTEL_TRACES_SAMPLER/],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'TraceIdRatioBased{1}', /invalid OTEL_TRACES_SAMPLER_ARG/],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '-0.1' }, 'TraceIdRatioBased{1}', /invalid OTEL_TRACES_SAMPLER_ARG/],
    [
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: 'one percent' },
      'TraceIdRatioBased{1}',
      /invalid OTEL_TRACES_SAMPLER_ARG/,
    ],
  ])('bad input %o is warned about and replaced: %s', (env, expected, warning) => {
    const { sampler, warnings } = read(env);
    expect(sampler.startsWith(expected)).toBe(true);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(warning);
  });
});
