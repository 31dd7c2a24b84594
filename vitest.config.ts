// Test runner settings: every test/**/*.test.ts file in its own forked process (uWS is a native
// addon and several tests spawn servers), files in parallel across the machine's cores.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
