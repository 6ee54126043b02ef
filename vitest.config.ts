import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

// Tests run from source: the "@rowbase/source" export condition maps every @rowbase/* package
// to its src/ (or proto/gen) files, so nothing has to be built first.
export default defineConfig({
  ssr: { resolve: { conditions: ["@rowbase/source", ...defaultServerConditions] } },
  test: {
    include: ["{services,gateway,test}/**/*.test.ts"],
    exclude: ["**/node_modules/**", "**/dist/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
