import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { importJWK, SignJWT } from "jose";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";

let sys: TestSystem;
let api: ReturnType<typeof client>;
let db: pg.Client;

beforeAll(async () => {
  sys = await startTestSystem();
  api = client(sys.baseUrl);
  db = new pg.Client({ connectionString: sys.databaseUrl });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await sys?.stop();
});

let counter = 0;
const newEmail = () => `person${++counter}.${Date.now()}@example.test`;
const PASSWORD = "correct horse battery";

async function codeFrom(email: string, after: number) {
  const message = await sys.mail.next(email, after);
  return /code: (\d{6})/.exec(message.subject)![1]!;
}

async function signUp(email = newEmail()) {
  const before = sys.mail.messages.length;
  expect(
    (await api("POST", "/auth/register", { body: { email, password: PASSWORD, name: "Grace" } }))
      .status,
  ).toBe(200);
  const verified = await api("POST", "/auth/verify_email", {
    body: { email, code: await codeFrom(email, before) },
  });
  expect(verified.status).toBe(200);
  return { email, tokens: verified.body.data };
}

async function userCount() {
  const { rows } = await db.query("select count(*)::int as n from identity.users");
  return rows[0].n as number;
}

describe("the account journey through the gateway", () => {
  it("registers, verifies by mailed code, logs in, refreshes, detects reuse and logs out", async () => {
    const email = newEmail();
    const before = sys.mail.messages.length;
    const registered = await api("POST", "/auth/register", {
      body: { email: `  ${email.toUpperCase()}`, password: PASSWORD, name: " Grace Hopper " },
    });
    expect(registered.status).toBe(200);
    expect(registered.body).toEqual({ message: "success", data: {} });
    expect(registered.headers.get("x-request-id")).toBeTruthy();

    const loginEarly = await api("POST", "/auth/login", { body: { email, password: PASSWORD } });
    expect(loginEarly.status).toBe(400);
    expect(loginEarly.body).toEqual({ message: "email_not_verified", data: {} });

    const code = await codeFrom(email, before);
    const verified = await api("POST", "/auth/verify_email", { body: { email, code } });
    expect(verified.status).toBe(200);
    expect(verified.body.message).toBe("success");
    expect(verified.body.data).toMatchObject({
      token_type: "Bearer",
      expires_in: 900,
      user: { email, name: "Grace Hopper", email_verified: true },
    });
    expect(verified.body.data.refresh_token).toMatch(/^rbr_[0-9A-Za-z]{48}$/);
    expect(verified.body.data.user.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(typeof verified.body.data.user.id).toBe("number");

    const login = await api("POST", "/auth/login", { body: { email, password: PASSWORD } });
    expect(login.status).toBe(200);
    const first = login.body.data;

    const current = await api("GET", "/auth/current", { token: first.access_token });
    expect(current.status).toBe(200);
    expect(current.body).toEqual({ message: "success", data: { user: verified.body.data.user } });

    const refreshed = await api("POST", "/auth/refresh", {
      body: { refresh_token: first.refresh_token },
    });
    expect(refreshed.status).toBe(200);
    const second = refreshed.body.data;
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect((await api("GET", "/auth/current", { token: second.access_token })).status).toBe(200);

    // The rotated token comes back: the whole family dies, access tokens included.
    const reuse = await api("POST", "/auth/refresh", {
      body: { refresh_token: first.refresh_token },
    });
    expect(reuse.status).toBe(401);
    expect(reuse.body).toEqual({ message: "invalid_refresh_token", data: {} });
    expect(
      (await api("POST", "/auth/refresh", { body: { refresh_token: second.refresh_token } }))
        .status,
    ).toBe(401);
    const dead = await api("GET", "/auth/current", { token: second.access_token });
    expect(dead.status).toBe(401);
    expect(dead.body).toEqual({ message: "unauthorized", data: {} });

    // A fresh session ends with logout, and only that session.
    const other = (await api("POST", "/auth/login", { body: { email, password: PASSWORD } })).body
      .data;
    const third = (await api("POST", "/auth/login", { body: { email, password: PASSWORD } })).body
      .data;
    const logout = await api("POST", "/auth/logout", { token: third.access_token });
    expect(logout.status).toBe(200);
    expect(logout.body).toEqual({ message: "success", data: {} });
    expect((await api("GET", "/auth/current", { token: third.access_token })).status).toBe(401);
    expect(
      (await api("POST", "/auth/refresh", { body: { refresh_token: third.refresh_token } })).status,
    ).toBe(401);
    expect((await api("GET", "/auth/current", { token: other.access_token })).status).toBe(200);
  });
});

describe("account errors", () => {
  it("refuses registering a verified e-mail and changes nothing", async () => {
    const { email } = await signUp();
    const users = await userCount();
    const again = await api("POST", "/auth/register", {
      body: { email, password: "another password" },
    });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ message: "email_already_exists", data: {} });
    expect(await userCount()).toBe(users);
    expect((await api("POST", "/auth/login", { body: { email, password: PASSWORD } })).status).toBe(
      200,
    );
  });

  it("answers invalid_verification_code for a wrong code and an unknown e-mail alike", async () => {
    const email = newEmail();
    const before = sys.mail.messages.length;
    await api("POST", "/auth/register", { body: { email, password: PASSWORD } });
    const code = await codeFrom(email, before);
    const wrong = code === "999999" ? "000000" : "999999";
    for (const body of [
      { email, code: wrong },
      { email: newEmail(), code },
    ]) {
      const response = await api("POST", "/auth/verify_email", { body });
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ message: "invalid_verification_code", data: {} });
    }
    const { rows } = await db.query(
      "select email_verified_at from identity.users where email = $1",
      [email],
    );
    expect(rows[0].email_verified_at).toBeNull();
  });

  it("answers the same invalid_credentials for an unknown e-mail and a wrong password", async () => {
    const { email } = await signUp();
    const unknown = await api("POST", "/auth/login", {
      body: { email: newEmail(), password: PASSWORD },
    });
    const wrong = await api("POST", "/auth/login", {
      body: { email, password: "not the password" },
    });
    const short = await api("POST", "/auth/login", { body: { email, password: "x" } });
    for (const response of [unknown, wrong, short]) {
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ message: "invalid_credentials", data: {} });
    }
  });

  it("always answers resend_code with empty success", async () => {
    const { email } = await signUp();
    for (const address of [email, newEmail()]) {
      const response = await api("POST", "/auth/resend_code", { body: { email: address } });
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ message: "success", data: {} });
    }
  });

  it("answers invalid_refresh_token for an unknown refresh token", async () => {
    const response = await api("POST", "/auth/refresh", { body: { refresh_token: "rbr_nothing" } });
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ message: "invalid_refresh_token", data: {} });
  });
});

describe("bearer tokens", () => {
  async function forge(
    claims: Record<string, unknown>,
    header: Record<string, unknown>,
    key?: KeyObject,
  ) {
    const jwk = sys.signingKeys[0]!;
    const signingKey = key ?? (await importJWK(jwk, "EdDSA"));
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "EdDSA", kid: jwk.kid, ...header } as { alg: string })
      .sign(signingKey);
  }

  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

  it("refuses missing, malformed, expired, forged and revoked tokens with 401 unauthorized", async () => {
    const { tokens } = await signUp();
    const [, payload] = tokens.access_token.split(".");
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
    const now = Math.floor(Date.now() / 1000);
    const otherKey = generateKeyPairSync("ed25519").privateKey;
    const bad = [
      undefined,
      "not-a-jwt",
      `${b64({ alg: "none", typ: "JWT" })}.${payload}.`,
      `${b64({ alg: "HS256", kid: sys.signingKeys[0]!.kid })}.${payload}.c2lnbmF0dXJl`,
      await forge({ ...claims, exp: now - 60, iat: now - 1000 }, {}),
      await forge({ ...claims, iss: "someone-else" }, {}),
      await forge(claims, { kid: "unknown-kid" }),
      await forge(claims, {}, otherKey),
      `${tokens.access_token.slice(0, -4)}AAAA`,
    ];
    for (const token of bad) {
      const response = await api("GET", "/auth/current", token ? { token } : {});
      expect(response.status, String(token)).toBe(401);
      expect(response.body).toEqual({ message: "unauthorized", data: {} });
    }
    expect((await api("GET", "/auth/current", { token: tokens.access_token })).status).toBe(200);
  });

  it("refuses a credential in the query string with the validation shape", async () => {
    const { tokens } = await signUp();
    const response = await api("GET", "/auth/current", {
      token: tokens.access_token,
      query: { access_token: tokens.access_token },
    });
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      status_code: 400,
      extra: [expect.objectContaining({ key: "access_token", source: "query" })],
    });
  });
});

describe("request errors", () => {
  it("answers the exact validation shape and writes nothing", async () => {
    const users = await userCount();
    const response = await api("POST", "/auth/register", {
      body: { email: "nope", password: "short", role: "admin" },
    });
    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      status_code: 400,
      detail: "Validation failed for POST /auth/register",
      extra: [
        { key: "email", message: expect.any(String), source: "body", code: "invalid_value" },
        { key: "password", message: expect.any(String), source: "body", code: "too_short" },
        { key: "role", message: expect.any(String), source: "body", code: "unknown_key" },
      ],
    });
    expect(await userCount()).toBe(users);
  });

  it("answers malformed JSON, a wrong content type and a missing body with 400", async () => {
    const cases = [
      { rawBody: "{not json", headers: { "content-type": "application/json" } },
      { rawBody: "email=a@b.c", headers: { "content-type": "application/x-www-form-urlencoded" } },
      { rawBody: "[1,2]", headers: { "content-type": "application/json" } },
      {},
    ];
    for (const options of cases) {
      const response = await api("POST", "/auth/login", options);
      expect(response.status, JSON.stringify(options)).toBe(400);
      expect(response.body).toMatchObject({
        status_code: 400,
        detail: "Validation failed for POST /auth/login",
      });
    }
  });

  it("answers 413 payload_too_large past 1 MiB", async () => {
    const response = await api("POST", "/auth/register", {
      body: { email: newEmail(), password: PASSWORD, name: "x".repeat(1024 * 1024 + 10) },
    });
    expect(response.status).toBe(413);
    expect(response.body).toEqual({ message: "payload_too_large", data: {} });
  });

  it("answers 404 not_found and 405 method_not_allowed", async () => {
    const missing = await api("GET", "/no/such/route");
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ message: "not_found", data: {} });
    const wrongMethod = await api("DELETE", "/auth/login");
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.body).toEqual({ message: "method_not_allowed", data: {} });
  });

  it("echoes a sane X-Request-Id and replaces an insane one", async () => {
    const sane = await api("GET", "/health", { headers: { "x-request-id": "client-req-42" } });
    expect(sane.headers.get("x-request-id")).toBe("client-req-42");
    const insane = await api("GET", "/health", { headers: { "x-request-id": "x".repeat(500) } });
    expect(insane.headers.get("x-request-id")).not.toBe("x".repeat(500));
  });
});

describe("service routes", () => {
  it("answers /health and /health/ready", async () => {
    expect((await api("GET", "/health")).body).toEqual({ message: "success", data: {} });
    const ready = await api("GET", "/health/ready");
    expect(ready.status).toBe(200);
  });

  it("serves an OpenAPI 3.1 document listing every account route with its body", async () => {
    const { status, body } = await api("GET", "/openapi.json");
    expect(status).toBe(200);
    expect(body.openapi).toMatch(/^3\.1\./);
    expect(body.info.version).toBe("1.0.0");
    for (const path of [
      "/auth/register",
      "/auth/verify_email",
      "/auth/resend_code",
      "/auth/login",
      "/auth/refresh",
    ]) {
      expect(
        body.paths[path]?.post?.requestBody?.content?.["application/json"]?.schema,
        path,
      ).toBeDefined();
    }
    expect(body.paths["/auth/current"]?.get).toBeDefined();
    expect(body.paths["/auth/logout"]?.post).toBeDefined();
    const docs = await api("GET", "/docs");
    expect(docs.status).toBe(200);
    expect(docs.headers.get("content-type")).toMatch(/text\/html/);
  });
});

describe("rate limits", () => {
  it("answers 429 too_many_requests with Retry-After once the login limit is used up", async () => {
    const limited = await startTestSystem({ RATE_LIMITS: "auth_login_ip=3/60" });
    try {
      const limitedApi = client(limited.baseUrl);
      const statuses: number[] = [];
      let last: Awaited<ReturnType<typeof limitedApi>> | undefined;
      for (let i = 0; i < 4; i++) {
        last = await limitedApi("POST", "/auth/login", {
          body: { email: "a@example.test", password: "whatever1" },
        });
        statuses.push(last.status);
      }
      expect(statuses).toEqual([401, 401, 401, 429]);
      expect(last!.body).toEqual({ message: "too_many_requests", data: {} });
      expect(Number(last!.headers.get("retry-after"))).toBeGreaterThan(0);
    } finally {
      await limited.stop();
    }
  });
});
