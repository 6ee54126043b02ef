import { type MetricsServer, startMetricsServer } from "@rowbase/kit";
import { RELAXED_RATE_LIMITS, startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";

/**
 * The gateway's HTTP and rate-limit metrics on /metrics (the process registry, served here on a
 * metrics port), for requests that reach the real identity service. Logins come from the
 * addresses in X-Forwarded-For (the gateway trusts the loopback proxy), three a minute each.
 */

let sys: TestSystem;
let metrics: MetricsServer;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sys = await startTestSystem({
    RATE_LIMITS: RELAXED_RATE_LIMITS.replace("auth_login_ip=10000/60", "auth_login_ip=3/60"),
    TRUSTED_PROXIES: "127.0.0.1",
  });
  api = client(sys.baseUrl);
  metrics = await startMetricsServer({ port: 0, host: "127.0.0.1" });
});

afterAll(async () => {
  await metrics?.close();
  await sys?.stop();
});

/** A login of nobody from `clientIp`: the identity service refuses it (401). */
const login = (clientIp: string) =>
  api("POST", "/auth/login", {
    headers: { "x-forwarded-for": clientIp },
    body: { email: `nobody.${Date.now()}@example.test`, password: "correct horse battery" },
  });

async function sample(series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const LOGIN = (status: number) =>
  `rowbase_http_requests_total{method="POST",route="/auth/login",status="${status}"}`;
const LOGIN_DURATION =
  'rowbase_http_request_duration_seconds_count{method="POST",route="/auth/login",status="401"}';
const UNMATCHED = 'rowbase_http_requests_total{method="GET",route="unmatched",status="404"}';
const REFUSED = 'rowbase_rate_limit_refusals_total{limit="auth_login_ip"}';

describe("gateway metrics on /metrics", () => {
  it("count a request under its route template and status, and time it", async () => {
    const [before, timed] = [await sample(LOGIN(401)), await sample(LOGIN_DURATION)];
    const response = await login("198.51.100.1");
    expect(response.status).toBe(401);
    expect(response.body).toMatchObject({ message: "invalid_credentials" });
    expect(await sample(LOGIN(401))).toBe(before + 1);
    expect(await sample(LOGIN_DURATION)).toBe(timed + 1);

    // A path no route has is counted as "unmatched", not under its own path.
    const unmatched = await sample(UNMATCHED);
    expect((await api("GET", "/no/such/path/42")).status).toBe(404);
    expect(await sample(UNMATCHED)).toBe(unmatched + 1);
    const text = await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();
    expect(text).not.toContain("/no/such/path");
  });

  it("count a 429 under the name of the limit that refused it", async () => {
    const [refused, tooMany] = [await sample(REFUSED), await sample(LOGIN(429))];
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await login("198.51.100.2")).status);
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect(await sample(REFUSED)).toBe(refused + 2);
    expect(await sample(LOGIN(429))).toBe(tooMany + 2);
  });
});
