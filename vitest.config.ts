import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Drills wait on conditions with their own deadlines; this only bounds a stuck test.
    testTimeout: 180_000,
    hookTimeout: 60_000,
    // Integration files each own their databases and streams, so files may run side by side;
    // two workers keep the 2-core machine from thrashing.
    maxWorkers: 2,
  },
});
