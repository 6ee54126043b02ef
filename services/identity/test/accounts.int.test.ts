import {
  type Cache,
  Code,
  createLogger,
  createServiceClient,
  freePort,
  PRINCIPAL_HEADER,
  RedisCache,
  signPrincipal,
} from "@rowbase/kit";
import {
  createTestDatabase,
  failureOf,
  type MailCatcher,
  reasonOf,
  startMailCatcher,
  testInfra,
  uniqueName,
  validationOf,
} from "@rowbase/kit/testing";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { createLocalJWKSet, jwtVerify } from "jose";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  generateSigningKey,
  identityEnv,
  migrateIdentity,
  type RunningIdentity,
  revokedSessionKey,
  startIdentity,
} from "../src/index.js";

const SECRET = "test-internal-secret-of-at-least-32-chars";

let service: RunningIdentity;
let client: ReturnType<typeof createServiceClient<typeof IdentityService>>;
let mail: MailCatcher;
let cache: Cache;
let db: pg.Client;
let dropDatabase: () => Promise<void>;
let config: ReturnType<typeof identityEnv.parse>;

async function codeFor(email: string, after?: number): Promise<string> {
  const message = await mail.next(email, after);
  return /code: (\d{6})/.exec(message.subject)![1]!;
}

let counter = 0;
function newEmail() {
  counter += 1;
  return `user${counter}.${uniqueName("x")}@example.test`;
}

async function registered(email = newEmail(), password = "correct horse battery") {
  const before = mail.messages.length;
  await client.register({ email, password, name: "Ada" });
  const session = (await client.verifyEmail({ email, code: await codeFor(email, before) }))
    .session!;
  return { email, password, session };
}

async function asUser(userId: bigint, sessionId: string) {
  return {
    headers: {
      [PRINCIPAL_HEADER]: await signPrincipal(SECRET, { kind: "user", userId, sessionId }),
    },
  };
}

beforeAll(async () => {
  const infra = await testInfra();
  const database = await createTestDatabase(infra.databaseUrl);
  dropDatabase = database.drop;
  mail = await startMailCatcher();
  cache = RedisCache.connect(infra.redisUrl, `${uniqueName("identity")}:`);
  config = identityEnv.parse({
    DATABASE_URL: database.url,
    INTERNAL_JWT_SECRET: SECRET,
    GRPC_HOST: "127.0.0.1",
    GRPC_PORT: "0",
    SMTP_URL: mail.url,
    JWT_SIGNING_KEYS: JSON.stringify([await generateSigningKey()]),
  });
  expect(await migrateIdentity(database.url)).toEqual([
    "InitialSchema",
    "OidcSignIn",
    "CodePerRegistration",
  ]);
  service = await startIdentity(config, {
    logger: createLogger("identity", process.env.TEST_LOG_LEVEL ?? "silent"),
    cache,
  });
  client = createServiceClient(IdentityService, `http://127.0.0.1:${service.server.port}`);
  db = new pg.Client({ connectionString: database.url });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await service?.stop();
  await cache?.close();
  await mail?.close();
  await dropDatabase?.();
});

describe("registration and verification", () => {
  it("stores an argon2id hash, mails a code, and opens a session on verification", async () => {
    const { email, session } = await registered();
    expect(session.user).toMatchObject({ email, name: "Ada", emailVerified: true });
    expect(session.refreshToken).toMatch(/^rbr_[0-9A-Za-z]{48}$/);
    expect(session.expiresIn).toBe(900);
    const { rows } = await db.query("select password_hash from identity.users where email = $1", [
      email,
    ]);
    expect(rows[0].password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
  });

  it("refuses a name the rule for names refuses, storing and mailing nothing", async () => {
    const email = newEmail();
    const before = mail.messages.length;
    for (const [name, message] of [
      ["Ada\u202eecalevol", "must not contain control characters"],
      ["Ada\u0085", "must not contain control characters"],
      ["\u200b\u2060", "must contain a visible character"],
      ["x".repeat(101), "must be 1-100 characters"],
    ]) {
      expect(
        await validationOf(client.register({ email, password: "a fine password", name })),
      ).toEqual([{ key: "name", message, source: "body", code: expect.any(String) }]);
    }
    const { rows } = await db.query("select 1 from identity.users where email = $1", [email]);
    expect(rows).toEqual([]);
    expect(mail.messages.filter((m) => m.to.includes(email))).toEqual([]);
    // No name is none, and a name is stored trimmed.
    await client.register({ email, password: "a fine password", name: "  Ada  " });
    const session = (await client.verifyEmail({ email, code: await codeFor(email, before) }))
      .session;
    expect(session?.user).toMatchObject({ email, name: "Ada" });
  });

  it("normalises the e-mail and refuses a verified one", async () => {
    const { email } = await registered();
    expect(
      await reasonOf(
        client.register({ email: `  ${email.toUpperCase()} `, password: "another password" }),
      ),
    ).toBe("email_already_exists");
  });

  it("mails nothing for the same password within a minute, and a new code after", async () => {
    const email = newEmail();
    const first = mail.messages.length;
    await client.register({ email, password: "first password" });
    const code = await codeFor(email, first);
    const second = mail.messages.length;
    await client.register({ email, password: "first password", name: "Later" });
    await new Promise((r) => setTimeout(r, 200));
    expect(mail.messages.slice(second).filter((m) => m.to.includes(email))).toHaveLength(0);

    await db.query("update identity.email_code set sent_at = now() - interval '2 minutes'");
    const third = mail.messages.length;
    await client.register({ email, password: "first password" });
    const next = await codeFor(email, third);
    await client.verifyEmail({ email, code: next });
    expect(await reasonOf(client.verifyEmail({ email, code }))).toBe("invalid_verification_code");
    expect((await client.login({ email, password: "first password" })).session?.user?.email).toBe(
      email,
    );
  });

  it("lets nobody who registers the address again choose the password the owner's code sets", async () => {
    const email = newEmail();
    const owner = mail.messages.length;
    await client.register({ email, password: "owner's password", name: "Owner" });
    const ownersCode = await codeFor(email, owner);
    // Within the minute, with another password: a code of its own goes out, the owner's stays.
    const attacker = mail.messages.length;
    await client.register({ email, password: "attacker's password", name: "Mallory" });
    const attackersCode = await codeFor(email, attacker);
    expect(attackersCode).not.toBe(ownersCode);
    const { rows: pending } = await db.query(
      `select c.name from identity.email_code c join identity.users u on u.id = c.user_id
        where u.email = $1 order by c.id`,
      [email],
    );
    expect(pending.map((row) => row.name)).toEqual(["Owner", "Mallory"]);

    const { session } = await client.verifyEmail({ email, code: ownersCode });
    expect(session?.user).toMatchObject({ email, name: "Owner", emailVerified: true });
    expect(await reasonOf(client.login({ email, password: "attacker's password" }))).toBe(
      "invalid_credentials",
    );
    expect(await reasonOf(client.verifyEmail({ email, code: attackersCode }))).toBe(
      "invalid_verification_code",
    );
    expect((await client.login({ email, password: "owner's password" })).session?.user?.email).toBe(
      email,
    );
  });

  it("sets the password of the code used when someone registered the address first", async () => {
    const email = newEmail();
    const attacker = mail.messages.length;
    await client.register({ email, password: "attacker's password" });
    await codeFor(email, attacker);
    const owner = mail.messages.length;
    await client.register({ email, password: "owner's password" });
    const ownersCode = await codeFor(email, owner);
    // Before verification, login answers for the latest registration only.
    expect(await reasonOf(client.login({ email, password: "owner's password" }))).toBe(
      "email_not_verified",
    );
    await client.verifyEmail({ email, code: ownersCode });
    expect(await reasonOf(client.login({ email, password: "attacker's password" }))).toBe(
      "invalid_credentials",
    );
    expect((await client.login({ email, password: "owner's password" })).session).toBeDefined();
  });

  it("gives the owner's account no name someone else registered the address with", async () => {
    const email = newEmail();
    const attacker = mail.messages.length;
    await client.register({ email, password: "attacker's password", name: "Mallory" });
    await codeFor(email, attacker);
    const owner = mail.messages.length;
    await client.register({ email, password: "owner's password" });
    const { session } = await client.verifyEmail({ email, code: await codeFor(email, owner) });
    expect(session?.user).toMatchObject({ email, name: "", emailVerified: true });
  });

  it("keeps the three latest codes, and a wrong code counts against each of them", async () => {
    const email = newEmail();
    const codes: string[] = [];
    for (const password of ["password one", "password two", "password three", "password four"]) {
      const before = mail.messages.length;
      await client.register({ email, password });
      codes.push(await codeFor(email, before));
    }
    const { rows } = await db.query(
      `select count(*)::int as n from identity.email_code c join identity.users u
        on u.id = c.user_id where u.email = $1`,
      [email],
    );
    expect(rows[0].n).toBe(3);
    expect(await reasonOf(client.verifyEmail({ email, code: codes[0]! }))).toBe(
      "invalid_verification_code",
    );
    const wrong = ["000000", "111111", "222222"].find((c) => !codes.includes(c))!;
    for (let i = 0; i < 4; i++) await reasonOf(client.verifyEmail({ email, code: wrong }));
    // The first try above was wrong too: five in all kill every live code.
    for (const code of codes.slice(1)) {
      expect(await reasonOf(client.verifyEmail({ email, code }))).toBe("invalid_verification_code");
    }
  });

  it("resends a code for the latest registration", async () => {
    const email = newEmail();
    const first = mail.messages.length;
    await client.register({ email, password: "first password" });
    await codeFor(email, first);
    const second = mail.messages.length;
    await client.register({ email, password: "second password" });
    await codeFor(email, second);
    await db.query("update identity.email_code set sent_at = now() - interval '2 minutes'");
    const resent = mail.messages.length;
    await client.resendCode({ email });
    await client.verifyEmail({ email, code: await codeFor(email, resent) });
    expect((await client.login({ email, password: "second password" })).session).toBeDefined();
    expect(await reasonOf(client.login({ email, password: "first password" }))).toBe(
      "invalid_credentials",
    );
  });

  it("kills a code after five wrong tries and refuses an expired one", async () => {
    const email = newEmail();
    const before = mail.messages.length;
    await client.register({ email, password: "a fine password" });
    const code = await codeFor(email, before);
    const wrong = code === "000000" ? "111111" : "000000";
    for (let i = 0; i < 5; i++) {
      expect(await reasonOf(client.verifyEmail({ email, code: wrong }))).toBe(
        "invalid_verification_code",
      );
    }
    expect(await reasonOf(client.verifyEmail({ email, code }))).toBe("invalid_verification_code");

    await db.query("update identity.email_code set sent_at = now() - interval '2 minutes'");
    const resent = mail.messages.length;
    await client.resendCode({ email });
    const fresh = await codeFor(email, resent);
    await db.query("update identity.email_code set expires_at = now() - interval '1 second'");
    expect(await reasonOf(client.verifyEmail({ email, code: fresh }))).toBe(
      "invalid_verification_code",
    );
  });

  it("answers resend the same for unknown, verified and throttled addresses, mailing only when due", async () => {
    const before = mail.messages.length;
    await client.resendCode({ email: newEmail() });
    const { email } = await registered();
    const afterRegistration = mail.messages.length;
    await client.resendCode({ email });
    const pending = newEmail();
    await client.register({ email: pending, password: "a fine password" });
    await client.resendCode({ email: pending });
    await new Promise((r) => setTimeout(r, 200));
    expect(
      mail.messages.slice(before).filter((m) => !m.to.includes(email) && !m.to.includes(pending)),
    ).toHaveLength(0);
    expect(mail.messages.slice(afterRegistration).filter((m) => m.to.includes(email))).toHaveLength(
      0,
    );
    expect(
      mail.messages.slice(afterRegistration).filter((m) => m.to.includes(pending)),
    ).toHaveLength(1);
  });
});

describe("the code's mail", () => {
  it("says how long the code lives, also when that is no whole number of minutes", async () => {
    const before = mail.messages.length;
    const email = newEmail();
    await client.register({ email, password: "a fine password" });
    expect((await mail.next(email, before)).raw).toContain("It is valid for 15 minutes");

    const shortLived = await startIdentity(
      { ...config, CODE_TTL_SECONDS: 90 },
      { logger: createLogger("identity", process.env.TEST_LOG_LEVEL ?? "silent"), cache },
    );
    try {
      const other = createServiceClient(
        IdentityService,
        `http://127.0.0.1:${shortLived.server.port}`,
      );
      const after = mail.messages.length;
      const another = newEmail();
      await other.register({ email: another, password: "a fine password" });
      expect((await mail.next(another, after)).raw).toContain("It is valid for 90 seconds");
    } finally {
      await shortLived.stop();
    }
  });
});

describe("while the mail server is away", () => {
  it("answers a registration 503 with its code kept, and resend as for any address", async () => {
    const unreachable = await startIdentity(
      { ...config, SMTP_URL: `smtp://127.0.0.1:${await freePort()}` },
      { logger: createLogger("identity", process.env.TEST_LOG_LEVEL ?? "silent"), cache },
    );
    try {
      const cut = createServiceClient(
        IdentityService,
        `http://127.0.0.1:${unreachable.server.port}`,
      );
      const email = newEmail();
      const refused = await failureOf(cut.register({ email, password: "a fine password" }));
      expect(refused.code).toBe(Code.Unavailable);
      const codes = async () =>
        (
          await db.query(
            "select count(*)::int as n from identity.email_code c join identity.users u on u.id = c.user_id where u.email = $1",
            [email],
          )
        ).rows[0].n;
      expect(await codes()).toBe(1);
      // Due for another code: resend answers as it does for any address, and mails nothing.
      await db.query("update identity.email_code set sent_at = now() - interval '2 minutes'");
      await cut.resendCode({ email });
      await cut.resendCode({ email: newEmail() });
      expect(await codes()).toBe(2);
      // Back with a mail server: the latest code arrives and confirms the registration.
      await db.query("update identity.email_code set sent_at = now() - interval '2 minutes'");
      const before = mail.messages.length;
      await client.resendCode({ email });
      const verified = await client.verifyEmail({ email, code: await codeFor(email, before) });
      expect(verified.session?.user?.email).toBe(email);
    } finally {
      await unreachable.stop();
    }
  });
});

describe("login", () => {
  it("gives the same answer for an unknown e-mail and a wrong password", async () => {
    const { email } = await registered();
    expect(await reasonOf(client.login({ email: newEmail(), password: "whatever it is" }))).toBe(
      "invalid_credentials",
    );
    expect(await reasonOf(client.login({ email, password: "wrong password" }))).toBe(
      "invalid_credentials",
    );
  });

  it("says email_not_verified only after a correct password", async () => {
    const email = newEmail();
    await client.register({ email, password: "a fine password" });
    expect(await reasonOf(client.login({ email, password: "a wrong password" }))).toBe(
      "invalid_credentials",
    );
    expect(await reasonOf(client.login({ email, password: "a fine password" }))).toBe(
      "email_not_verified",
    );
  });

  it("signs EdDSA access tokens that verify against the published JWKS", async () => {
    const { session } = await registered();
    const { keys } = await client.getJwks({});
    const jwks = createLocalJWKSet({ keys: keys.map((k) => ({ ...k })) });
    const { payload, protectedHeader } = await jwtVerify(session.accessToken, jwks, {
      issuer: "rowbase",
    });
    expect(protectedHeader).toMatchObject({ alg: "EdDSA", kid: keys[0]!.kid });
    expect(payload.sub).toBe(session.user!.id.toString());
    expect(payload.exp! - payload.iat!).toBe(900);
    expect(typeof payload.sid).toBe("string");
  });
});

describe("sessions", () => {
  function sessionIdOf(accessToken: string): string {
    return JSON.parse(Buffer.from(accessToken.split(".")[1]!, "base64url").toString()).sid;
  }

  it("rotates refresh tokens and revokes the family when a rotated one comes back", async () => {
    const { session } = await registered();
    const sid = sessionIdOf(session.accessToken);
    const rotated = (await client.refresh({ refreshToken: session.refreshToken })).session!;
    expect(rotated.refreshToken).not.toBe(session.refreshToken);
    expect(sessionIdOf(rotated.accessToken)).toBe(sid);

    expect(await reasonOf(client.refresh({ refreshToken: session.refreshToken }))).toBe(
      "invalid_refresh_token",
    );
    expect(await reasonOf(client.refresh({ refreshToken: rotated.refreshToken }))).toBe(
      "invalid_refresh_token",
    );
    expect(await cache.get(revokedSessionKey(sid))).toBe("1");
    const options = await asUser(session.user!.id, sid);
    expect(await reasonOf(client.getCurrentUser({}, options))).toBe("unauthorized");

    // A mark that was not stored (Redis away at the reuse) is stored by the next try.
    await cache.del(revokedSessionKey(sid));
    expect(await reasonOf(client.refresh({ refreshToken: session.refreshToken }))).toBe(
      "invalid_refresh_token",
    );
    expect(await cache.get(revokedSessionKey(sid))).toBe("1");
  });

  it("lets only one of two parallel refreshes with one token through, then kills the family", async () => {
    const { session } = await registered();
    const results = await Promise.allSettled([
      client.refresh({ refreshToken: session.refreshToken }),
      client.refresh({ refreshToken: session.refreshToken }),
    ]);
    const ok = results.filter((r) => r.status === "fulfilled");
    expect(ok).toHaveLength(1);
    const winner = (ok[0] as PromiseFulfilledResult<{ session?: { refreshToken: string } }>).value
      .session!;
    expect(await reasonOf(client.refresh({ refreshToken: winner.refreshToken }))).toBe(
      "invalid_refresh_token",
    );
  });

  it("refuses unknown and expired refresh tokens", async () => {
    expect(await reasonOf(client.refresh({ refreshToken: "rbr_unknown" }))).toBe(
      "invalid_refresh_token",
    );
    const { session } = await registered();
    await db.query("update identity.refresh_token set expires_at = now() - interval '1 second'");
    expect(await reasonOf(client.refresh({ refreshToken: session.refreshToken }))).toBe(
      "invalid_refresh_token",
    );
  });

  it("serves the current user to its session and ends the session on logout", async () => {
    const { email, session } = await registered();
    const sid = sessionIdOf(session.accessToken);
    const options = await asUser(session.user!.id, sid);
    expect((await client.getCurrentUser({}, options)).user).toMatchObject({
      email,
      emailVerified: true,
    });
    expect(await reasonOf(client.getCurrentUser({}))).toBe("unauthorized");
    await client.logout({}, options);
    expect(await reasonOf(client.getCurrentUser({}, options))).toBe("unauthorized");
    expect(await reasonOf(client.refresh({ refreshToken: session.refreshToken }))).toBe(
      "invalid_refresh_token",
    );
    expect(await cache.get(revokedSessionKey(sid))).toBe("1");
  });

  it("refuses a forged principal", async () => {
    const { session } = await registered();
    const forged = await signPrincipal("another-secret-that-is-32-chars-long!!", {
      kind: "user",
      userId: session.user!.id,
      sessionId: sessionIdOf(session.accessToken),
    });
    expect(
      await reasonOf(client.getCurrentUser({}, { headers: { [PRINCIPAL_HEADER]: forged } })),
    ).toBe("unauthorized");
  });
});

describe("the user directory (GetUsers)", () => {
  it("answers other services, and nobody else, with the users asked for", async () => {
    const { email, session } = await registered();
    const id = session.user!.id;
    const asService = {
      headers: {
        [PRINCIPAL_HEADER]: await signPrincipal(SECRET, {
          kind: "service",
          service: "organization",
        }),
      },
    };
    const { users } = await client.getUsers({ ids: [id, 999_999_999n] }, asService);
    expect(users.map((user) => [user.id, user.email])).toEqual([[id, email]]);

    expect(await reasonOf(client.getUsers({ ids: [id] }))).toBe("unauthorized");
    const asTheUser = await asUser(id, "a-session");
    expect(await reasonOf(client.getUsers({ ids: [id] }, asTheUser))).toBe("internal_only");
  });
});
