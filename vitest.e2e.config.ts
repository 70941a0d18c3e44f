import { defineConfig } from 'vitest/config';

// End-to-end tests against a real OpenTelemetry Collector and Jaeger (built from the Go module
// proxy on first run). Run by `npm run test:e2e`.
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 900_000, // the first Jaeger build takes minutes
    fileParallelism: false,
  },
});
