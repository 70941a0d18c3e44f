import { defineConfig } from 'vitest/config';

// Adoption tests: the packed package installed with npm into copies of the fixture services
// (test/fixtures/services) outside the repository, their own test suites run plainly and under
// `--import otel-lifeline/register`. Run by `npm run test:adoption` (after a build).
export default defineConfig({
  test: {
    include: ['test/adoption/**/*.test.ts'],
    globalSetup: ['test/adoption/global-setup.ts'],
    // One suite at a time: the timings compare runs on a 2-core machine.
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 300_000,
  },
});
