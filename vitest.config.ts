import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

// Tests run from source: the "@rowbase/source" export condition maps every @rowbase/* package
// to its src/ (or proto/gen) files, so nothing has to be built first. The bundlers' "module"
// condition is left out: vitest hands these conditions to Node, and @opentelemetry/api's
// "module" build is not loadable by Node (production never uses that condition either).
const serverConditions = defaultServerConditions.filter((condition) => condition !== "module");

export default defineConfig({
  ssr: { resolve: { conditions: ["@rowbase/source", ...serverConditions] } },
  test: {
    include: ["{services,gateway,test}/**/*.test.ts"],
    exclude: ["**/node_modules/**", "**/dist/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
