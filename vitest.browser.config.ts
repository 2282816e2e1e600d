// The browser suite (npm run test:browser): drives the operator console in
// headless Chromium, so it is kept out of `npm test`.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/browser/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
