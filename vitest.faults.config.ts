import { defineConfig } from 'vitest/config';

// Fault tests: real network namespaces and iptables (root), real processes. Run by `npm run test:faults`.
export default defineConfig({
  test: {
    // The repository has the auto-instrumentations package (a benchmark baseline); the services these
    // tests run are ones without it. Tests of register mode with it turn it back on.
    env: { LIFELINE_AUTO_INSTRUMENTATIONS: 'off' },
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 900_000, // a first Jaeger build (collector faults) takes minutes
    fileParallelism: false,
  },
});
