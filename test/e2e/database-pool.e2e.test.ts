import { processMetricsRegistry } from "@rowbase/kit";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({ DATABASE_POOL_MAX: "3" });
});

afterAll(async () => {
  await sys?.stop();
});

describe("DATABASE_POOL_MAX", () => {
  it("sizes the PostgreSQL pool of every service", async () => {
    // Each replica of each service holds up to this many connections; the Helm chart sums them
    // against the server's max_connections, so every service must take the setting.
    // A pool is made at its first query: identity runs none until a sign-in asks it.
    const login = await client(sys.baseUrl)("POST", "/auth/login", {
      body: { email: "nobody@example.test", password: "correct horse battery" },
    });
    expect(login.status).toBe(401);
    const metric = (await processMetricsRegistry().getMetricsAsJSON()).find(
      (m) => m.name === "rowbase_db_pool_max_connections",
    );
    const limits = Object.fromEntries(
      (metric?.values ?? []).map((value) => [value.labels.schema, value.value]),
    );
    expect(limits).toEqual({
      identity: 3,
      organization: 3,
      catalog: 3,
      records: 3,
      files: 3,
      webhooks: 3,
    });
  });
});
