// Test runner settings: every test/**/*.test.ts file in its own forked process (uWS is a native
// addon and several tests spawn servers), files in parallel across the machine's cores. The
// global setup gives the run its own temp dir and ends whatever the run left alive.
import { configDefaults, defineConfig } from 'vitest/config';

/** Files that measure latency under a load they make themselves, or run several gateway processes
 * under real-time load: they run after the others, one at a time, so the rest of the suite is not
 * part of what they measure and does not starve their real-time clients. */
const alone = [
  'test/hostile/fuzz.test.ts',
  'test/hostile/flush-flood.test.ts',
  'test/hostile/frame-flood.test.ts',
  'test/cluster/rolling.test.ts',
];

export default defineConfig({
  test: {
    pool: 'forks',
    globalSetup: ['test/support/global-setup.ts'],
    // Quiet gateway logs unless asked for (tests that read logs set their own level).
    env: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        // vitest's default leaves one core idle (one worker on a 2-core machine); the files mostly
        // wait on sockets, child processes and real-time pacing, so every core gets a worker.
        test: {
          name: 'parallel',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...alone],
          maxWorkers: '100%',
        },
      },
      {
        extends: true,
        test: { name: 'alone', include: alone, fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      // One table, a row per folder of src/ with its files under it.
      reporter: [['text', { skipFull: false, maxCols: 120 }]],
      reportOnFailure: true,
    },
  },
});
