import { defineConfig } from 'vitest/config';

// End-to-end tests against a real OpenTelemetry Collector and Jaeger (built from the Go module
// proxy on first run). Run by `npm run test:e2e`.
export default defineConfig({
  test: {
    // The repository has the auto-instrumentations package (a benchmark baseline); the services these
    // tests run are ones without it. Tests of register mode with it turn it back on.
    env: { LIFELINE_AUTO_INSTRUMENTATIONS: 'off' },
    include: ['test/e2e/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 900_000, // the first Jaeger build takes minutes
    fileParallelism: false,
  },
});
