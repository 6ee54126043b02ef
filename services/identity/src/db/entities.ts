import { defineEntity, p } from "@mikro-orm/postgresql";

export const User = defineEntity({
  name: "User",
  tableName: "users",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    email: p.text().unique(),
    name: p.text().default(""),
    passwordHash: p.text().nullable(),
    emailVerifiedAt: p.datetime().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

/**
 * A verification code mailed for one registration of an unverified account. It carries that
 * registration's password and name, which verifying with it sets: a later registration of the
 * address (by anyone) gets a code of its own and cannot change what an earlier code confirms.
 */
export const EmailCode = defineEntity({
  name: "EmailCode",
  tableName: "email_code",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    userId: p.bigint().columnType("bigint"),
    codeHash: p.text(),
    passwordHash: p.text(),
    name: p.text(),
    sentAt: p.datetime(),
    expiresAt: p.datetime(),
    failedAttempts: p.integer().default(0),
  },
});

/** A session family: every refresh token rotated from one sign-in. */
export const Session = defineEntity({
  name: "Session",
  tableName: "session",
  properties: {
    id: p.uuid().primary(),
    userId: p.bigint().columnType("bigint"),
    createdAt: p.datetime().onCreate(() => new Date()),
    revokedAt: p.datetime().nullable(),
  },
});

export const RefreshToken = defineEntity({
  name: "RefreshToken",
  tableName: "refresh_token",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    sessionId: p.uuid(),
    tokenHash: p.text().unique(),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime(),
    /** Set when the token is rotated; presenting it again is reuse. */
    usedAt: p.datetime().nullable(),
  },
});

/**
 * A started OpenID Connect sign-in, waiting for the provider's redirect. Keyed by the SHA-256 of
 * its `state`, which only the browser holds; consumed once, by `delete ... returning`.
 */
export const OidcSignInAttempt = defineEntity({
  name: "OidcSignInAttempt",
  tableName: "oidc_sign_in",
  properties: {
    stateHash: p.text().primary(),
    nonce: p.text(),
    codeVerifier: p.text(),
    redirectUri: p.text(),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime(),
  },
});

/** An account at the OpenID Connect provider, known by (issuer, subject), signing in as a user. */
export const OidcIdentity = defineEntity({
  name: "OidcIdentity",
  tableName: "oidc_identity",
  properties: {
    issuer: p.text().primary(),
    subject: p.text().primary(),
    userId: p.bigint().columnType("bigint"),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export const entities = [User, EmailCode, Session, RefreshToken, OidcSignInAttempt, OidcIdentity];
