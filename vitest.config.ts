import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The browser suite needs Chromium: npm run test:browser (vitest.browser.config.ts).
    // The end-to-end benchmark runs: npm run test:bench (vitest.e2e.config.ts).
    exclude: ["test/browser/**", "test/e2e/**", "**/node_modules/**"],
    // A PostgreSQL server (SYNAPSE_TEST_POSTGRES, or a throwaway cluster) for the stores' tests.
    globalSetup: ["test/setup/postgres.ts"],
    // Most files wait on sockets and child processes, not on this process's CPU: on a
    // 2-core machine vitest's default (cores - 1) runs them one at a time.
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
