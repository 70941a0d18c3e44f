import { defineConfig } from 'vitest/config';

// Fault tests: real network namespaces and iptables (root), real processes. Run by `npm run test:faults`.
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 900_000, // a first Jaeger build (collector faults) takes minutes
    fileParallelism: false,
  },
});
