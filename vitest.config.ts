import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The browser suite needs Chromium: npm run test:browser (vitest.browser.config.ts).
    exclude: ["test/browser/**", "**/node_modules/**"],
    // A PostgreSQL server (SYNAPSE_TEST_POSTGRES, or a throwaway cluster) for the stores' tests.
    globalSetup: ["test/setup/postgres.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
