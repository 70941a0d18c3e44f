import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/e2e/**', 'test/faults/**'],
    // Timing tests use tolerances sized for a loaded 2-core machine.
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
