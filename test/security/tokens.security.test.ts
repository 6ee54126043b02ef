import { createPublicKey, generateKeyPairSync } from "node:crypto";
import { importJWK, SignJWT } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { newEmail, PASSWORD, type SignedUpUser, signUp } from "../e2e/support/accounts.js";
import { addMember, expectError, q } from "../e2e/support/organizations.js";
import {
  createApiToken,
  createTable,
  createTenant,
  expectValidation,
  type Tenant,
  type TestTable,
} from "../e2e/support/records.js";
import { securitySystem } from "./support/fixture.js";

/**
 * Credentials: every forged, expired, tampered or revoked credential gets 401
 * `unauthorized` on a writing route, credentials in the query string get the 400 validation
 * shape, and refresh tokens rotate with reuse detection. Nothing changes in any case.
 */

const ctx = securitySystem();
let tenant: Tenant;
let victim: SignedUpUser;
let table: TestTable;

beforeAll(async () => {
  tenant = await createTenant(ctx.sys, ctx.api);
  victim = tenant.owner;
  table = await createTable(ctx.api, tenant, [{ name: "Name", type: "text" }]);
  ctx.state.track(tenant.orgId);
});

const signingKey = async () => {
  const jwk = ctx.sys.signingKeys[0]!;
  return { kid: jwk.kid, key: await importJWK(jwk, "EdDSA") };
};

/** A session JWT like the identity service's, with whatever the test changes. */
async function sessionJwt(
  options: {
    kid?: string;
    issuer?: string;
    sub?: string;
    sid?: string | null;
    expiresIn?: string | number;
    key?: Parameters<SignJWT["sign"]>[0];
  } = {},
) {
  const real = await signingKey();
  const claims: Record<string, unknown> = {};
  if (options.sid !== null) claims.sid = options.sid ?? "forged-session";
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "EdDSA", kid: options.kid ?? real.kid, typ: "JWT" })
    .setIssuer(options.issuer ?? "rowbase")
    .setSubject(options.sub ?? String(victim.id))
    .setIssuedAt()
    .setExpirationTime(options.expiresIn ?? "15m")
    .sign(options.key ?? real.key);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
const payloadOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString()) as Record<string, unknown>;

/** A writing session route: creating a database in the victim's organization. */
async function createDatabaseWith(headers: Record<string, string>) {
  return ctx.api("POST", "/database/create", {
    headers,
    query: q({ organization_id: tenant.orgId }),
    body: { name: "intruder" },
  });
}

const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("forged and broken session tokens on a writing route", () => {
  const cases: [string, () => Promise<Record<string, string>>][] = [
    ["no Authorization header", async () => ({})],
    ["an empty bearer", async () => ({ authorization: "Bearer " })],
    ["another scheme", async () => ({ authorization: `Basic ${victim.token}` })],
    ["garbage", async () => bearer("not.a.jwt")],
    [
      "an expired token (signed with the real key)",
      async () => bearer(await sessionJwt({ expiresIn: Math.floor(Date.now() / 1000) - 60 })),
    ],
    [
      "a token signed with another Ed25519 key under the real kid",
      async () => {
        const { privateKey } = generateKeyPairSync("ed25519");
        return bearer(await sessionJwt({ key: privateKey }));
      },
    ],
    [
      "a real token with its payload tampered (another subject)",
      async () => {
        const [header, , signature] = victim.token.split(".");
        const payload = { ...payloadOf(victim.token), sub: String(victim.id + 1) };
        return bearer(`${header}.${b64(payload)}.${signature}`);
      },
    ],
    [
      "a real token with its signature cut off",
      async () => bearer(`${victim.token.split(".").slice(0, 2).join(".")}.`),
    ],
    [
      "alg none",
      async () => {
        const header = { alg: "none", kid: ctx.sys.signingKeys[0]!.kid, typ: "JWT" };
        return bearer(`${b64(header)}.${b64(payloadOf(victim.token))}.`);
      },
    ],
    [
      "HS256 signed with the public key (PEM)",
      async () => {
        const { d: _d, ...publicJwk } = ctx.sys.signingKeys[0]!;
        const pem = createPublicKey({ key: publicJwk, format: "jwk" })
          .export({ type: "spki", format: "pem" })
          .toString();
        const jwt = await new SignJWT(payloadOf(victim.token))
          .setProtectedHeader({ alg: "HS256", kid: publicJwk.kid, typ: "JWT" })
          .sign(new TextEncoder().encode(pem));
        return bearer(jwt);
      },
    ],
    [
      "HS256 signed with the public key (raw x)",
      async () => {
        const jwk = ctx.sys.signingKeys[0]!;
        const jwt = await new SignJWT(payloadOf(victim.token))
          .setProtectedHeader({ alg: "HS256", kid: jwk.kid, typ: "JWT" })
          .sign(Buffer.from(jwk.x, "base64url"));
        return bearer(jwt);
      },
    ],
    [
      "an unknown kid (valid signature)",
      async () => bearer(await sessionJwt({ kid: "00000000-0000-4000-8000-000000000000" })),
    ],
    [
      "no kid at all",
      async () => {
        const real = await signingKey();
        const jwt = await new SignJWT({ sid: "x" })
          .setProtectedHeader({ alg: "EdDSA", typ: "JWT" })
          .setIssuer("rowbase")
          .setSubject(String(victim.id))
          .setExpirationTime("15m")
          .sign(real.key);
        return bearer(jwt);
      },
    ],
    ["a wrong issuer", async () => bearer(await sessionJwt({ issuer: "evil" }))],
    ["no session id", async () => bearer(await sessionJwt({ sid: null }))],
    ["a subject that is no user id", async () => bearer(await sessionJwt({ sub: "1 or 1=1" }))],
    ["an API-token-shaped secret nobody issued", async () => bearer(`rb_${"A".repeat(40)}`)],
  ];

  it.each(cases)("%s: 401 unauthorized, nothing written", async (_name, headers) => {
    const sent = await headers();
    await ctx.state.unchanged(async () => {
      expectError(await createDatabaseWith(sent), 401, "unauthorized");
    });
  });

  it("an API token on a session-only (management) route: 401, nothing written", async () => {
    await ctx.state.unchanged(async () => {
      expectError(await createDatabaseWith(bearer(tenant.writeToken)), 401, "unauthorized");
    });
  });

  it("a forged token for another real user is still refused on record routes", async () => {
    const other = await signUp(ctx.sys, ctx.api);
    const forged = await sessionJwt({
      sub: String(other.id),
      key: generateKeyPairSync("ed25519").privateKey,
    });
    await ctx.state.unchanged(async () => {
      expectError(
        await ctx.api("POST", "/public/record/create", {
          token: forged,
          query: q({ table_id: table.tableId }),
          body: { data: { Name: "x" } },
        }),
        401,
        "unauthorized",
      );
    });
  });
});

describe("credentials in the query string", () => {
  it.each(["access_token", "token", "api_key", "API_KEY"])(
    "?%s= is refused with 400 naming it, even with a valid header, and nothing is written",
    async (parameter) => {
      await ctx.state.unchanged(async () => {
        const response = await ctx.api("POST", "/public/record/create", {
          token: tenant.writeToken,
          query: q({ table_id: table.tableId, [parameter]: tenant.writeToken }),
          body: { data: { Name: "smuggled" } },
        });
        expect(response.status, JSON.stringify(response.body)).toBe(400);
        expect(response.body).toEqual({
          status_code: 400,
          detail: expect.any(String),
          extra: [expect.objectContaining({ key: parameter, source: "query" })],
        });
        expect(response.text).not.toContain(tenant.writeToken);
      });
    },
  );
});

describe("revoked credentials", () => {
  it("a revoked API token stops working on every record route within 5 seconds", async () => {
    const listed = await ctx.api("GET", "/api_token/list", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId }),
    });
    const token = await createApiToken(ctx.api, tenant.owner, tenant.orgId, "read_write");
    const after = await ctx.api("GET", "/api_token/list", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId }),
    });
    const known = new Set(listed.body.data.api_tokens.map((t: { token_id: number }) => t.token_id));
    const tokenId = after.body.data.api_tokens.find(
      (t: { token_id: number }) => !known.has(t.token_id),
    ).token_id;
    const revoked = await ctx.api("POST", "/api_token/revoke", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId, token_id: tokenId }),
    });
    expect(revoked.status).toBe(200);
    // A revoked token is dead within 5 seconds on every replica; reads show when.
    let status = 200;
    for (const started = Date.now(); status !== 401; await sleep(250)) {
      expect(Date.now() - started, "revocation took effect").toBeLessThan(5_500);
      status = (
        await ctx.api("GET", "/public/record/list", {
          token,
          query: q({ table_id: table.tableId, database_id: table.databaseId }),
        })
      ).status;
    }
    await ctx.state.unchanged(async () => {
      expectError(
        await ctx.api("POST", "/public/record/create", {
          token,
          query: q({ table_id: table.tableId }),
          body: { data: { Name: "after revoke" } },
        }),
        401,
        "unauthorized",
      );
      expectError(
        await ctx.api("GET", "/public/record/list", {
          token,
          query: q({ table_id: table.tableId, database_id: table.databaseId }),
        }),
        401,
        "unauthorized",
      );
    });
  });

  it("after logout the session's access token is dead at once", async () => {
    const user = await signUp(ctx.sys, ctx.api);
    const loggedOut = await ctx.api("POST", "/auth/logout", { token: user.token });
    expect(loggedOut.status).toBe(200);
    await ctx.state.unchanged(async () => {
      expectError(
        await ctx.api("POST", "/organization/create", {
          token: user.token,
          body: { name: "Late" },
        }),
        401,
        "unauthorized",
      );
      expectError(
        await ctx.api("POST", "/auth/refresh", { body: { refresh_token: user.refreshToken } }),
        401,
        "invalid_refresh_token",
      );
    });
  });
});

describe("refresh tokens", () => {
  const refresh = (token: string) =>
    ctx.api("POST", "/auth/refresh", { body: { refresh_token: token } });

  it("an unknown refresh token: 401 invalid_refresh_token, nothing changes", async () => {
    await ctx.state.unchanged(async () => {
      expectError(await refresh(`rbr_${"0".repeat(48)}`), 401, "invalid_refresh_token");
    });
  });

  it("reusing a rotated refresh token revokes the whole family and touches only sessions", async () => {
    const user = await signUp(ctx.sys, ctx.api);
    const first = await refresh(user.refreshToken);
    expect(first.status).toBe(200);
    const rotated = first.body.data;
    await ctx.state.unchanged(
      async () => {
        expectError(await refresh(user.refreshToken), 401, "invalid_refresh_token");
      },
      { tables: ["identity.session", "identity.refresh_token"] },
    );
    // The family is dead: the newest refresh token and its access token too.
    await ctx.state.unchanged(async () => {
      expectError(await refresh(rotated.refresh_token), 401, "invalid_refresh_token");
      expectError(
        await ctx.api("GET", "/auth/current", { token: rotated.access_token }),
        401,
        "unauthorized",
      );
      expectError(
        await ctx.api("POST", "/organization/create", {
          token: rotated.access_token,
          body: { name: "After reuse" },
        }),
        401,
        "unauthorized",
      );
    });
  });

  it("two parallel refreshes with one token: at most one wins, and the family does not fork", async () => {
    const user = await signUp(ctx.sys, ctx.api);
    const answers = await Promise.all([refresh(user.refreshToken), refresh(user.refreshToken)]);
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses, JSON.stringify(answers.map((a) => a.body))).toEqual([200, 401]);
    const loser = answers.find((a) => a.status === 401)!;
    expectError(loser, 401, "invalid_refresh_token");
    const winner = answers.find((a) => a.status === 200)!.body.data;
    // The loser presented an already-rotated token: reuse. No live pair may come out of it.
    await ctx.state.unchanged(async () => {
      expectError(await refresh(winner.refresh_token), 401, "invalid_refresh_token");
      expectError(
        await ctx.api("GET", "/auth/current", { token: winner.access_token }),
        401,
        "unauthorized",
      );
    });
  });
});

describe("codes cannot be guessed", () => {
  const wrongCode = (code: string) => (code === "000000" ? "111111" : "000000");

  it("five wrong e-mail codes kill the code: the right one then changes nothing", async () => {
    const email = newEmail("guess");
    const before = ctx.sys.mail.messages.length;
    expect(
      (await ctx.api("POST", "/auth/register", { body: { email, password: PASSWORD } })).status,
    ).toBe(200);
    const code = /code: (\d{6})/.exec((await ctx.sys.mail.next(email, before)).subject)![1]!;
    for (let i = 0; i < 5; i++) {
      expectError(
        await ctx.api("POST", "/auth/verify_email", { body: { email, code: wrongCode(code) } }),
        400,
        "invalid_verification_code",
      );
    }
    await ctx.state.unchanged(async () => {
      expectError(
        await ctx.api("POST", "/auth/verify_email", { body: { email, code } }),
        400,
        "invalid_verification_code",
      );
      expectError(
        await ctx.api("POST", "/auth/login", { body: { email, password: PASSWORD } }),
        400,
        "email_not_verified",
      );
    });
  });

  it("five wrong owner-transfer codes kill the code: ownership stays where it is", async () => {
    const heir = await signUp(ctx.sys, ctx.api);
    const heirId = await addMember(ctx.api, tenant.owner, tenant.orgId, heir, "admin");
    const before = ctx.sys.mail.messages.length;
    const sent = await ctx.api("POST", "/organization/transfer/send_code", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId }),
      body: { member_id: heirId },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const subject = (await ctx.sys.mail.next(tenant.owner.email, before)).subject;
    const code = /(\d{6})/.exec(subject)![1]!;
    const confirm = (value: string) =>
      ctx.api("POST", "/organization/transfer/confirm", {
        token: tenant.owner.token,
        query: q({ organization_id: tenant.orgId }),
        body: { member_id: heirId, code: value },
      });
    for (let i = 0; i < 5; i++) {
      expectError(await confirm(wrongCode(code)), 400, "invalid_verification_code");
    }
    await ctx.state.unchanged(async () => {
      expectError(await confirm(code), 400, "invalid_verification_code");
      // Nor can the heir confirm with it.
      expectError(
        await ctx.api("POST", "/organization/transfer/confirm", {
          token: heir.token,
          query: q({ organization_id: tenant.orgId }),
          body: { member_id: heirId, code },
        }),
        403,
        "organization_forbidden",
      );
    });
  });

  it("an access token or an API token is no refresh token", async () => {
    await ctx.state.unchanged(async () => {
      for (const token of [victim.token, tenant.writeToken, `${victim.refreshToken}x`]) {
        const response = await ctx.api("POST", "/auth/refresh", { body: { refresh_token: token } });
        if (token.length > 200) {
          // A session JWT is longer than any refresh token: refused by shape.
          expectValidation(response, [{ key: "refresh_token", source: "body" }]);
        } else {
          expectError(response, 401, "invalid_refresh_token");
        }
      }
    });
  });
});
