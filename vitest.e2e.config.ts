import { defineConfig } from "vitest/config";

// The long end-to-end runs kept apart from `npm test`: `npm run test:bench`.
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.test.ts"],
    testTimeout: 300_000,
    hookTimeout: 60_000,
  },
});
