import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The repository has the auto-instrumentations package (a benchmark baseline); the services these
    // tests run are ones without it. Tests of register mode with it turn it back on.
    env: { LIFELINE_AUTO_INSTRUMENTATIONS: 'off' },
    include: ['test/**/*.test.ts'],
    exclude: ['test/e2e/**', 'test/faults/**', 'test/adoption/**', 'test/drivers/**'],
    // Timing tests use tolerances sized for a loaded 2-core machine.
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
