import { randomBytes } from "node:crypto";
import { startTestOidcProvider, type TestOidcProvider } from "@rowbase/identity/testing";
import { RELAXED_RATE_LIMITS, startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";

let provider: TestOidcProvider;
let sys: TestSystem;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  provider = await startTestOidcProvider();
  sys = await startTestSystem(provider.env);
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
  await provider?.close();
});

let counter = 0;
const newEmail = () => `idp${++counter}.${Date.now()}@example.test`;
const newSubject = () => `sub-${randomBytes(6).toString("hex")}`;

/** GET /oauth/idp, then the provider's login and consent as `sub`: the code and state. */
async function authorized(sub: string) {
  const started = await api("GET", "/oauth/idp");
  expect(started.status).toBe(302);
  const landing = await provider.authorize(started.headers.get("location")!, sub);
  return { code: landing.searchParams.get("code")!, state: landing.searchParams.get("state")! };
}

describe("signing in through the identity provider", () => {
  it("redirects to the provider, then trades code and state for an AuthTokenResponse", async () => {
    const sub = newSubject();
    const email = newEmail();
    provider.setAccount(sub, { email, email_verified: true, name: "Ada Lovelace" });

    const started = await api("GET", "/oauth/idp");
    expect(started.status).toBe(302);
    expect(started.headers.get("cache-control")).toBe("no-store");
    expect(started.headers.get("x-request-id")).toBeTruthy();
    const location = new URL(started.headers.get("location")!);
    const discovery = (await (
      await fetch(`${provider.issuer}/.well-known/openid-configuration`)
    ).json()) as { authorization_endpoint: string };
    expect(`${location.origin}${location.pathname}`).toBe(discovery.authorization_endpoint);
    expect(Object.fromEntries(location.searchParams)).toMatchObject({
      client_id: provider.clientId,
      redirect_uri: provider.redirectUris[0],
      response_type: "code",
      code_challenge_method: "S256",
      state: expect.stringMatching(/^[\w-]{43,}$/),
      nonce: expect.stringMatching(/^[\w-]{43,}$/),
      code_challenge: expect.stringMatching(/^[\w-]{43}$/),
    });

    const landing = await provider.authorize(location.href, sub);
    const code = landing.searchParams.get("code")!;
    const state = landing.searchParams.get("state")!;
    expect(state).toBe(location.searchParams.get("state"));
    const exchanged = await api("POST", "/oauth/exchange", { body: { code, state } });
    expect(exchanged.status).toBe(200);
    expect(exchanged.body.message).toBe("success");
    const data = exchanged.body.data;
    expect(Object.keys(data).sort()).toEqual([
      "access_token",
      "expires_in",
      "refresh_token",
      "token_type",
      "user",
    ]);
    expect(data).toMatchObject({
      token_type: "Bearer",
      expires_in: 900,
      user: { email, name: "Ada Lovelace", email_verified: true },
    });
    expect(Object.keys(data.user).sort()).toEqual([
      "created_at",
      "email",
      "email_verified",
      "id",
      "name",
    ]);
    expect(typeof data.user.id).toBe("number");
    expect(data.user.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(data.refresh_token).toMatch(/^rbr_[0-9A-Za-z]{48}$/);

    const current = await api("GET", "/auth/current", { token: data.access_token });
    expect(current.status).toBe(200);
    expect(current.body.data.user).toEqual(data.user);
    const refreshed = await api("POST", "/auth/refresh", {
      body: { refresh_token: data.refresh_token },
    });
    expect(refreshed.status).toBe(200);

    // The same provider account signs in as the same user again.
    const again = await authorized(sub);
    const second = await api("POST", "/oauth/exchange", { body: again });
    expect(second.status).toBe(200);
    expect(second.body.data.user.id).toBe(data.user.id);
  });

  it("links to an account registered with a password when the provider verified the e-mail", async () => {
    const email = newEmail();
    const before = sys.mail.messages.length;
    await api("POST", "/auth/register", { body: { email, password: "correct horse battery" } });
    const mailed = /code: (\d{6})/.exec((await sys.mail.next(email, before)).subject)![1]!;
    const verified = await api("POST", "/auth/verify_email", { body: { email, code: mailed } });
    expect(verified.status).toBe(200);

    const sub = newSubject();
    provider.setAccount(sub, { email, email_verified: false });
    const refused = await api("POST", "/oauth/exchange", { body: await authorized(sub) });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({ message: "idp_auth_error", data: {} });

    provider.setAccount(sub, { email, email_verified: true });
    const linked = await api("POST", "/oauth/exchange", { body: await authorized(sub) });
    expect(linked.status).toBe(200);
    expect(linked.body.data.user.id).toBe(verified.body.data.user.id);
  });

  it("answers 400 idp_auth_error in the domain envelope for a spent, unknown or wrong state or code", async () => {
    const sub = newSubject();
    provider.setAccount(sub, { email: newEmail(), email_verified: true });
    const { code, state } = await authorized(sub);
    expect((await api("POST", "/oauth/exchange", { body: { code, state } })).status).toBe(200);

    const other = await authorized(sub);
    for (const body of [
      { code, state },
      { code: other.code, state: randomBytes(32).toString("base64url") },
      { code: `${other.code}x`, state: other.state },
    ]) {
      const refused = await api("POST", "/oauth/exchange", { body });
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual({ message: "idp_auth_error", data: {} });
    }
  });

  it("refuses malformed requests with the validation shape", async () => {
    const cases: [Record<string, unknown>, { key: string; message: string }[]][] = [
      [{ code: "abc" }, [{ key: "state", message: "is required" }]],
      [{ code: "", state: "s" }, [{ key: "code", message: "is required" }]],
      [{ code: "c", state: 7 }, [{ key: "state", message: "must be a string" }]],
      [
        { code: "c".repeat(2049), state: "s" },
        [{ key: "code", message: "must be at most 2048 characters" }],
      ],
      [{ code: "c", state: "s", iss: "x" }, [{ key: "iss", message: "is not allowed" }]],
    ];
    for (const [body, items] of cases) {
      const refused = await api("POST", "/oauth/exchange", { body });
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual({
        status_code: 400,
        detail: "Validation failed for POST /oauth/exchange",
        extra: items.map((item) => ({ ...item, source: "body", code: expect.any(String) })),
      });
    }

    for (const [query, message] of [
      [{ redirect_uri: "https://evil.example/oauth/callback" }, "is not an allowed redirect URI"],
      [{ redirect_uri: "not a url" }, "must be an absolute URL"],
    ] as const) {
      const refused = await api("GET", "/oauth/idp", { query });
      expect(refused.status).toBe(400);
      expect(refused.headers.get("location")).toBeNull();
      expect(refused.body).toEqual({
        status_code: 400,
        detail: "Validation failed for GET /oauth/idp",
        extra: [{ key: "redirect_uri", message, source: "query", code: "invalid_value" }],
      });
    }
    const unknown = await api("GET", "/oauth/idp", { query: { next: "/" } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.extra).toEqual([
      { key: "next", message: "is not allowed", source: "query", code: "unknown_key" },
    ]);
  });

  it("documents the redirect and the exchange in /openapi.json", async () => {
    const { body: document } = await api("GET", "/openapi.json");
    const idp = document.paths["/oauth/idp"].get;
    expect(idp.security).toEqual([]);
    expect(Object.keys(idp.responses)).not.toContain("200");
    expect(idp.responses["302"].headers.Location.schema).toEqual({ type: "string", format: "uri" });
    expect(idp.parameters).toEqual([
      expect.objectContaining({ name: "redirect_uri", in: "query", required: false }),
    ]);
    const exchange = document.paths["/oauth/exchange"].post;
    expect(exchange.requestBody.content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/OAuthExchangeCodeSchema",
    });
    expect(exchange.responses["200"].content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/AuthTokenResponse",
    });
    expect(exchange.responses["400"].description).toContain("idp_auth_error");
    expect(exchange.responses["429"]).toBeDefined();
  });
});

describe("without an identity provider configured", () => {
  let bare: TestSystem;
  let bareApi: ReturnType<typeof client>;

  beforeAll(async () => {
    bare = await startTestSystem({
      RATE_LIMITS: `${RELAXED_RATE_LIMITS},oauth_exchange_ip=2/60,oauth_idp_ip=2/60`,
    });
    bareApi = client(bare.baseUrl);
  });

  afterAll(async () => {
    await bare?.stop();
  });

  it("answers the redirect 503 service_unavailable and the exchange 400 idp_auth_error, and rate-limits both steps per IP", async () => {
    for (let i = 0; i < 2; i++) {
      const redirect = await bareApi("GET", "/oauth/idp");
      expect(redirect.status).toBe(503);
      expect(redirect.headers.get("location")).toBeNull();
      expect(redirect.body).toEqual({ message: "service_unavailable", data: {} });
    }
    const tooMany = await bareApi("GET", "/oauth/idp");
    expect(tooMany.status).toBe(429);
    expect(tooMany.body).toEqual({ message: "too_many_requests", data: {} });

    for (let i = 0; i < 2; i++) {
      const exchange = await bareApi("POST", "/oauth/exchange", {
        body: { code: "code", state: "state" },
      });
      expect(exchange.status).toBe(400);
      expect(exchange.body).toEqual({ message: "idp_auth_error", data: {} });
    }
    const limited = await bareApi("POST", "/oauth/exchange", {
      body: { code: "code", state: "state" },
    });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ message: "too_many_requests", data: {} });
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
