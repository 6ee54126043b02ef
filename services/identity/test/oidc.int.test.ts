import { createHash, randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Cache,
  createLogger,
  createServiceClient,
  errorInfoOf,
  PRINCIPAL_HEADER,
  RedisCache,
  signPrincipal,
} from "@rowbase/kit";
import {
  createTestDatabase,
  type MailCatcher,
  startMailCatcher,
  testInfra,
  uniqueName,
} from "@rowbase/kit/testing";
import type { Session } from "@rowbase/proto/rowbase/identity/v1/identity_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { createLocalJWKSet, jwtVerify } from "jose";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  generateSigningKey,
  identityEnv,
  migrateIdentity,
  type RunningIdentity,
  startIdentity,
} from "../src/index.js";
import {
  startTestOidcProvider,
  type TestOidcClaims,
  type TestOidcProvider,
} from "./oidc-provider.js";

const SECRET = "test-internal-secret-of-at-least-32-chars";
const DEFAULT_REDIRECT = "https://app.rowbase.test/oauth/callback";
const OTHER_REDIRECT = "https://admin.rowbase.test/oauth/callback";

type IdentityClient = ReturnType<typeof createServiceClient<typeof IdentityService>>;

let databaseUrl: string;
let dropDatabase: () => Promise<void>;
let mail: MailCatcher;
let cache: Cache;
let db: pg.Client;
let signingKeys: string;
/** What afterAll stops, last started first. */
const running: (() => Promise<void>)[] = [];

/** The provider most tests use: e-mail and name in the ID token, two redirect URIs. */
let provider: TestOidcProvider;
let client: IdentityClient;

async function startService(env: Record<string, string>): Promise<IdentityClient> {
  const config = identityEnv.parse({
    DATABASE_URL: databaseUrl,
    INTERNAL_JWT_SECRET: SECRET,
    GRPC_HOST: "127.0.0.1",
    GRPC_PORT: "0",
    SMTP_URL: mail.url,
    JWT_SIGNING_KEYS: signingKeys,
    ...env,
  });
  const service: RunningIdentity = await startIdentity(config, {
    logger: createLogger("identity", process.env.TEST_LOG_LEVEL ?? "silent"),
    cache,
  });
  running.push(() => service.stop());
  return createServiceClient(IdentityService, `http://127.0.0.1:${service.server.port}`);
}

beforeAll(async () => {
  const infra = await testInfra();
  const database = await createTestDatabase(infra.databaseUrl);
  databaseUrl = database.url;
  dropDatabase = database.drop;
  mail = await startMailCatcher();
  cache = RedisCache.connect(infra.redisUrl, `${uniqueName("identity")}:`);
  signingKeys = JSON.stringify([await generateSigningKey()]);
  await migrateIdentity(databaseUrl);
  provider = await startTestOidcProvider({ redirectUris: [DEFAULT_REDIRECT, OTHER_REDIRECT] });
  running.push(() => provider.close());
  client = await startService({ ...provider.env, OIDC_ALLOWED_REDIRECT_URIS: OTHER_REDIRECT });
  db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  for (const stop of running.reverse()) await stop();
  await cache?.close();
  await mail?.close();
  await dropDatabase?.();
});

async function failureOf(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (error) {
    expect(error).toBeInstanceOf(ConnectError);
    return error as ConnectError;
  }
  throw new Error("expected the call to fail");
}

/** The call fails with idp_auth_error and says nothing more to the client. */
async function expectIdpAuthError(call: Promise<unknown>) {
  const error = await failureOf(call);
  expect(error.code).toBe(Code.InvalidArgument);
  expect(errorInfoOf(error)?.reason).toBe("idp_auth_error");
  expect(error.rawMessage).toBe("idp_auth_error");
  expect(errorInfoOf(error)?.metadata).toEqual({});
}

let counter = 0;
function uniqueEmail() {
  counter += 1;
  return `person${counter}.${uniqueName("x")}@example.test`;
}
function newSubject() {
  return `sub-${randomBytes(6).toString("hex")}`;
}

const sha256 = (value: string) => createHash("sha256").update(value).digest("hex");

/** Starts a sign-in and plays the browser at the provider as `sub`: the code and state. */
async function authorized(
  sub: string,
  options: { via?: IdentityClient; at?: TestOidcProvider; redirectUri?: string } = {},
) {
  const { authorizationUrl } = await (options.via ?? client).beginOidcSignIn({
    redirectUri: options.redirectUri ?? "",
  });
  const landing = await (options.at ?? provider).authorize(authorizationUrl, sub);
  const code = landing.searchParams.get("code");
  const state = landing.searchParams.get("state");
  if (!code || !state) throw new Error(`the provider sent no code: ${landing}`);
  return { code, state, landing };
}

async function signIn(sub: string, claims?: TestOidcClaims): Promise<Session> {
  if (claims) provider.setAccount(sub, claims);
  const { code, state } = await authorized(sub);
  return (await client.exchangeOidcCode({ code, state })).session!;
}

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await db.query(`select count(*)::int as n from ${sql}`, params);
  return rows[0].n as number;
}

async function registered(email: string, password: string, verify: boolean) {
  const before = mail.messages.length;
  await client.register({ email, password, name: "Grace" });
  const code = /code: (\d{6})/.exec((await mail.next(email, before)).subject)![1]!;
  if (!verify) return undefined;
  return (await client.verifyEmail({ email, code })).session!;
}

function sessionIdOf(accessToken: string): string {
  return JSON.parse(Buffer.from(accessToken.split(".")[1]!, "base64url").toString()).sid;
}

describe("beginning a sign-in", () => {
  it("sends the browser to the provider with state, nonce and PKCE S256, storing only the state's hash", async () => {
    const discovery = (await (
      await fetch(`${provider.issuer}/.well-known/openid-configuration`)
    ).json()) as { authorization_endpoint: string };
    const { authorizationUrl } = await client.beginOidcSignIn({ redirectUri: "" });
    const url = new URL(authorizationUrl);
    expect(`${url.origin}${url.pathname}`).toBe(discovery.authorization_endpoint);
    const params = Object.fromEntries(url.searchParams);
    expect(params).toMatchObject({
      client_id: provider.clientId,
      response_type: "code",
      redirect_uri: DEFAULT_REDIRECT,
      code_challenge_method: "S256",
    });
    expect(params.scope!.split(" ").sort()).toEqual(["email", "openid", "profile"]);
    expect(params.state).toMatch(/^[\w-]{43,}$/);
    expect(params.nonce).toMatch(/^[\w-]{43,}$/);
    expect(params.code_challenge).toMatch(/^[\w-]{43}$/);

    const { rows } = await db.query(
      `select *, extract(epoch from expires_at - created_at)::int as ttl
       from identity.oidc_sign_in where state_hash = $1`,
      [sha256(params.state!)],
    );
    expect(rows).toHaveLength(1);
    const row = rows[0];
    expect(row.nonce).toBe(params.nonce);
    expect(row.redirect_uri).toBe(DEFAULT_REDIRECT);
    expect(createHash("sha256").update(row.code_verifier).digest("base64url")).toBe(
      params.code_challenge,
    );
    expect(row.ttl).toBeGreaterThanOrEqual(599);
    expect(row.ttl).toBeLessThanOrEqual(601);
    expect(await count("identity.oidc_sign_in where state_hash = $1", [params.state])).toBe(0);

    const again = new URL((await client.beginOidcSignIn({ redirectUri: "" })).authorizationUrl);
    expect(again.searchParams.get("state")).not.toBe(params.state);
    expect(again.searchParams.get("nonce")).not.toBe(params.nonce);
    expect(again.searchParams.get("code_challenge")).not.toBe(params.code_challenge);
  });

  it("uses an allowed redirect URI for the whole flow and refuses any other", async () => {
    const sub = newSubject();
    const email = uniqueEmail();
    provider.setAccount(sub, { email, email_verified: true, name: "Ada" });
    const { code, state, landing } = await authorized(sub, { redirectUri: OTHER_REDIRECT });
    expect(`${landing.origin}${landing.pathname}`).toBe(OTHER_REDIRECT);
    // The token request must repeat the same redirect URI, or the provider refuses the code.
    const session = (await client.exchangeOidcCode({ code, state })).session!;
    expect(session.user?.email).toBe(email);

    const before = await count("identity.oidc_sign_in");
    for (const redirectUri of [
      "https://evil.example/oauth/callback",
      `${DEFAULT_REDIRECT}?next=/`,
      "not a url",
    ]) {
      const error = await failureOf(client.beginOidcSignIn({ redirectUri }));
      expect(error.code).toBe(Code.InvalidArgument);
      const info = errorInfoOf(error);
      expect(info?.reason).toBe("validation_failed");
      expect(JSON.parse(info!.metadata.extra!)).toEqual([
        {
          key: "redirect_uri",
          message: "is not an allowed redirect URI",
          source: "query",
          code: "invalid_value",
        },
      ]);
    }
    expect(await count("identity.oidc_sign_in")).toBe(before);
  });
});

describe("exchanging the code", () => {
  it("creates a verified user without a password and opens a working session", async () => {
    const sub = newSubject();
    const email = uniqueEmail();
    const users = await count("identity.users");
    const session = await signIn(sub, {
      email: email.toUpperCase(),
      email_verified: true,
      name: "Ada Lovelace",
    });
    expect(session.user).toMatchObject({ email, name: "Ada Lovelace", emailVerified: true });
    expect(session.refreshToken).toMatch(/^rbr_[0-9A-Za-z]{48}$/);
    expect(session.expiresIn).toBe(900);
    expect(await count("identity.users")).toBe(users + 1);

    const { rows } = await db.query(
      "select password_hash, email_verified_at from identity.users where id = $1",
      [session.user!.id],
    );
    expect(rows[0].password_hash).toBeNull();
    expect(rows[0].email_verified_at).not.toBeNull();
    const links = await db.query("select issuer, subject, user_id from identity.oidc_identity");
    expect(links.rows).toContainEqual({
      issuer: provider.issuer,
      subject: sub,
      user_id: String(session.user!.id),
    });

    const { keys } = await client.getJwks({});
    const { payload } = await jwtVerify(
      session.accessToken,
      createLocalJWKSet({ keys: keys.map((k) => ({ ...k })) }),
      { issuer: "rowbase" },
    );
    expect(payload.sub).toBe(session.user!.id.toString());
    const principal = await signPrincipal(SECRET, {
      kind: "user",
      userId: session.user!.id,
      sessionId: sessionIdOf(session.accessToken),
    });
    const current = await client.getCurrentUser({}, { headers: { [PRINCIPAL_HEADER]: principal } });
    expect(current.user?.email).toBe(email);
    const refreshed = (await client.refresh({ refreshToken: session.refreshToken })).session!;
    expect(refreshed.user?.id).toBe(session.user!.id);

    // No password was ever set: a password sign-in fails like any wrong password.
    for (const password of ["", "correct horse battery"]) {
      const error = await failureOf(client.login({ email, password }));
      expect(errorInfoOf(error)?.reason).toBe("invalid_credentials");
    }
  });

  it("signs the same provider account in as the same user, even after its e-mail changed", async () => {
    const sub = newSubject();
    const email = uniqueEmail();
    const first = await signIn(sub, { email, email_verified: true, name: "Ada" });
    const users = await count("identity.users");
    const second = await signIn(sub);
    expect(second.user?.id).toBe(first.user!.id);
    expect(second.refreshToken).not.toBe(first.refreshToken);

    const changed = await signIn(sub, { email: uniqueEmail(), email_verified: false });
    expect(changed.user).toMatchObject({ id: first.user!.id, email, name: "Ada" });
    expect(await count("identity.users")).toBe(users);
    expect(await count("identity.oidc_identity where user_id = $1", [first.user!.id])).toBe(1);
  });

  it("links to an existing password user only when the provider says the e-mail is verified", async () => {
    const email = uniqueEmail();
    const password = "correct horse battery";
    const existing = (await registered(email, password, true))!;
    const sub = newSubject();
    const users = await count("identity.users");

    for (const unverified of [{}, { email_verified: false }, { email_verified: "true" }]) {
      provider.setAccount(sub, { email, name: "Impostor", ...unverified });
      const { code, state } = await authorized(sub);
      await expectIdpAuthError(client.exchangeOidcCode({ code, state }));
    }
    expect(await count("identity.oidc_identity where subject = $1", [sub])).toBe(0);
    expect(await count("identity.users")).toBe(users);

    const linked = await signIn(sub, { email, email_verified: true, name: "Impostor" });
    expect(linked.user).toMatchObject({ id: existing.user!.id, email, name: "Grace" });
    expect(await count("identity.oidc_identity where subject = $1", [sub])).toBe(1);
    expect(await count("identity.users")).toBe(users);
    // The account keeps its password.
    expect((await client.login({ email, password })).session?.user?.id).toBe(existing.user!.id);
  });

  it("takes over an unverified registration only with a verified e-mail, dropping its password and name", async () => {
    const email = uniqueEmail();
    const password = "a password nobody proved";
    await registered(email, password, false);
    const [row] = (await db.query("select id from identity.users where email = $1", [email])).rows;

    const session = await signIn(newSubject(), { email, email_verified: true, name: "Owner" });
    expect(session.user).toMatchObject({ email, emailVerified: true, name: "Owner" });
    expect(String(session.user!.id)).toBe(row.id);
    const error = await failureOf(client.login({ email, password }));
    expect(errorInfoOf(error)?.reason).toBe("invalid_credentials");
    expect(await count("identity.email_code where user_id = $1", [row.id])).toBe(0);
  });

  it("refuses an account without a usable e-mail, or whose new e-mail is not verified", async () => {
    const users = await count("identity.users");
    for (const claims of [
      { email_verified: true, name: "No Mail" },
      { email: "not-an-address", email_verified: true },
      { email: uniqueEmail(), email_verified: false },
      { email: uniqueEmail() },
    ] satisfies TestOidcClaims[]) {
      const sub = newSubject();
      provider.setAccount(sub, claims);
      const { code, state } = await authorized(sub);
      await expectIdpAuthError(client.exchangeOidcCode({ code, state }));
      expect(await count("identity.oidc_identity where subject = $1", [sub])).toBe(0);
    }
    expect(await count("identity.users")).toBe(users);
  });

  it("reads the e-mail from the userinfo endpoint when the ID token carries only the subject", async () => {
    const quiet = await startTestOidcProvider({ claimsIn: "userinfo" });
    running.push(() => quiet.close());
    const via = await startService(quiet.env);
    const sub = newSubject();
    const email = uniqueEmail();
    quiet.setAccount(sub, { email, email_verified: true, name: "Quiet" });
    const { code, state } = await authorized(sub, { via, at: quiet });
    const session = (await via.exchangeOidcCode({ code, state })).session!;
    expect(session.user).toMatchObject({ email, name: "Quiet", emailVerified: true });
    const links = await db.query("select issuer from identity.oidc_identity where subject = $1", [
      sub,
    ]);
    expect(links.rows).toEqual([{ issuer: quiet.issuer }]);
  });
});

describe("refusing an exchange", () => {
  const account = () => {
    const sub = newSubject();
    provider.setAccount(sub, { email: uniqueEmail(), email_verified: true });
    return sub;
  };

  it("accepts a state once", async () => {
    const { code, state } = await authorized(account());
    await client.exchangeOidcCode({ code, state });
    await expectIdpAuthError(client.exchangeOidcCode({ code, state }));
    expect(await count("identity.oidc_sign_in where state_hash = $1", [sha256(state)])).toBe(0);
  });

  it("refuses an unknown state", async () => {
    const { code } = await authorized(account());
    await expectIdpAuthError(
      client.exchangeOidcCode({ code, state: randomBytes(32).toString("base64url") }),
    );
  });

  it("refuses an expired state and consumes it", async () => {
    const { code, state } = await authorized(account());
    await db.query(
      "update identity.oidc_sign_in set expires_at = now() - interval '1 second' where state_hash = $1",
      [sha256(state)],
    );
    await expectIdpAuthError(client.exchangeOidcCode({ code, state }));
    expect(await count("identity.oidc_sign_in where state_hash = $1", [sha256(state)])).toBe(0);
  });

  it("refuses a tampered code, after which the state is spent", async () => {
    const { code, state } = await authorized(account());
    await expectIdpAuthError(client.exchangeOidcCode({ code: `${code}x`, state }));
    await expectIdpAuthError(client.exchangeOidcCode({ code, state }));
  });

  it("refuses a code with the state of another sign-in (PKCE and nonce do not match)", async () => {
    const sub = account();
    const first = await authorized(sub);
    const second = await authorized(sub);
    const users = await count("identity.users");
    await expectIdpAuthError(client.exchangeOidcCode({ code: first.code, state: second.state }));
    expect(await count("identity.users")).toBe(users);
  });
});

async function expectServiceUnavailable(call: Promise<unknown>) {
  const error = await failureOf(call);
  expect(error.code).toBe(Code.Unavailable);
  expect(errorInfoOf(error)?.reason).toBe("service_unavailable");
}

describe("without a usable provider", () => {
  it("answers service_unavailable to a new sign-in and idp_auth_error to an exchange when none is configured", async () => {
    const bare = await startService({});
    await expectServiceUnavailable(bare.beginOidcSignIn({ redirectUri: "" }));
    await expectServiceUnavailable(bare.beginOidcSignIn({ redirectUri: DEFAULT_REDIRECT }));
    const users = await count("identity.users");
    await expectIdpAuthError(bare.exchangeOidcCode({ code: "code", state: "state" }));
    expect(await count("identity.users")).toBe(users);
  });

  it("answers service_unavailable to a new sign-in while the provider cannot be reached", async () => {
    const gone = await startTestOidcProvider();
    await gone.close();
    const stranded = await startService(gone.env);
    const before = await count("identity.oidc_sign_in");
    await expectServiceUnavailable(stranded.beginOidcSignIn({ redirectUri: "" }));
    expect(await count("identity.oidc_sign_in")).toBe(before);
  });
});
