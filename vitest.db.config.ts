import { defineConfig } from 'vitest/config';

// Driver tests against real database servers (PostgreSQL, MariaDB, Redis from Debian's packages;
// test/support/databases.ts starts them). Run by `npm run test:db`.
export default defineConfig({
  test: {
    // The repository has the auto-instrumentations package (a benchmark baseline); the services these
    // tests run are ones without it. Tests of register mode with it turn it back on.
    env: { LIFELINE_AUTO_INSTRUMENTATIONS: 'off' },
    include: ['test/drivers/**/*.test.ts'],
    // Deadline tolerances are sized for a loaded 2-core machine: database servers of several files
    // at once on top of their test processes would be more than that.
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
