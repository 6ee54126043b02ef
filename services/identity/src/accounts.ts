import {
  type EntityManager,
  type InferEntity,
  LockMode,
  UniqueConstraintViolationException,
} from "@mikro-orm/postgresql";
import type { Logger } from "@rowbase/kit";
import {
  type Cache,
  Code,
  ConnectError,
  codeHash,
  codeMatches,
  domainError,
  newCode,
  type Orm,
  sha256Hex,
} from "@rowbase/kit";
import { normalizeEmail } from "@rowbase/kit/field-types";
import { lifetimeText, type Mailer } from "@rowbase/kit/mailer";
import type { IdentityConfig } from "./config.js";
import { EmailCode, RefreshToken, Session, User } from "./db/entities.js";
import type { AccessTokenSigner } from "./domain/access-tokens.js";
import { requiredDisplayName } from "./domain/display-name.js";
import { hashPassword, verifyPassword } from "./domain/passwords.js";
import { newRefreshToken } from "./domain/secrets.js";

/** A code goes out at most once a minute per address. */
const RESEND_INTERVAL_MS = 60_000;
/** Wrong codes that kill a verification code. */
const MAX_CODE_ATTEMPTS = 5;
/** Live codes an unverified account keeps (one per registration with another password). */
const MAX_LIVE_CODES = 3;

export type UserRow = InferEntity<typeof User>;
type EmailCodeRow = InferEntity<typeof EmailCode>;

export interface IssuedSession {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  user: UserRow;
}

export interface AccountsDeps {
  orm: Orm;
  cache: Cache;
  mailer: Mailer;
  logger: Logger;
  signer: AccessTokenSigner;
  config: Pick<IdentityConfig, "CODE_TTL_SECONDS" | "REFRESH_TOKEN_TTL_SECONDS">;
}

/** The cache key the gateway checks to refuse access tokens of a revoked session at once. */
export function revokedSessionKey(sessionId: string): string {
  return `session-revoked:${sessionId}`;
}

/** Registration, e-mail verification, sign-in and the session family of refresh tokens. */
export class Accounts {
  constructor(private readonly deps: AccountsDeps) {}

  private em(): EntityManager {
    return this.deps.orm.em.fork();
  }

  /**
   * Creates an unverified account, or registers an unverified one again, and mails a code for
   * this registration: verifying with it sets this password and name. A registration with the
   * password of a code that went out less than a minute ago mails nothing (that code stays
   * valid); any other gets a code of its own, and the earlier codes keep confirming what they
   * were sent for, so nobody who registers an address after (or before) its owner can choose the
   * password the owner's code confirms. The account's own password becomes this one, for
   * `login`'s `email_not_verified` and for `resendCode`.
   */
  async register(email: string, password: string, rawName: string): Promise<void> {
    const name = requiredDisplayName(rawName);
    const address = normalizeEmail(email);
    const passwordHash = await hashPassword(password);
    let code: string | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        code = await this.em().transactional(async (em) => {
          let user = await em.findOne(
            User,
            { email: address },
            { lockMode: LockMode.PESSIMISTIC_WRITE },
          );
          if (user?.emailVerifiedAt) throw domainError(Code.AlreadyExists, "email_already_exists");
          if (user) {
            const latest = await this.latestCode(em, user.id);
            if (
              latest &&
              this.sentRecently(latest) &&
              (await verifyPassword(latest.passwordHash, password))
            ) {
              return undefined;
            }
            // The name too, even none: the code mailed now confirms this registration's name,
            // never one an earlier registrant of the address chose.
            user.passwordHash = passwordHash;
            user.name = name;
          } else {
            user = em.create(User, { email: address, name, passwordHash });
          }
          await em.flush();
          return this.issueCode(em, user);
        });
        break;
      } catch (error) {
        // Two first registrations of one address raced; the loser now sees the winner's row.
        if (error instanceof UniqueConstraintViolationException && attempt === 0) continue;
        throw error;
      }
    }
    if (!code) return;
    await this.mailCode(address, code).catch((error: unknown) => {
      // Committed: the code is good once the mail server is back and the user asks again.
      throw new ConnectError(
        "the code could not be mailed",
        Code.Unavailable,
        undefined,
        [],
        error,
      );
    });
  }

  /**
   * Mails a code for the account's latest registration, at most once a minute. The mail goes
   * out after the answer, which is the same whatever the address: waiting for the mail server
   * would tell by the time it takes (or by its failure) which addresses have a registration
   * waiting for its code. A mail that fails is logged; asking again sends another.
   */
  async resendCode(email: string): Promise<void> {
    const address = normalizeEmail(email);
    const code = await this.em().transactional(async (em) => {
      const user = await em.findOne(
        User,
        { email: address },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!user?.passwordHash || user.emailVerifiedAt) return undefined;
      const latest = await this.latestCode(em, user.id);
      if (latest && this.sentRecently(latest)) return undefined;
      return this.issueCode(em, user);
    });
    if (!code) return;
    this.mailCode(address, code).catch((error: unknown) =>
      this.deps.logger.error({ err: error }, "verification code not mailed"),
    );
  }

  private latestCode(em: EntityManager, userId: bigint) {
    return em.findOne(EmailCode, { userId }, { orderBy: { id: "desc" } });
  }

  private sentRecently(code: EmailCodeRow): boolean {
    return Date.now() - code.sentAt.getTime() < RESEND_INTERVAL_MS;
  }

  /**
   * A new code confirming the account's current password and name. The account keeps at most
   * MAX_LIVE_CODES codes: older and expired ones are dropped.
   */
  private async issueCode(em: EntityManager, user: UserRow): Promise<string> {
    const now = new Date();
    const code = newCode();
    em.create(EmailCode, {
      userId: user.id,
      codeHash: codeHash([user.id], code),
      passwordHash: user.passwordHash!,
      name: user.name,
      sentAt: now,
      expiresAt: new Date(now.getTime() + this.deps.config.CODE_TTL_SECONDS * 1000),
      failedAttempts: 0,
    });
    await em.flush();
    const kept = await em.find(
      EmailCode,
      { userId: user.id, expiresAt: { $gt: now } },
      { orderBy: { id: "desc" }, limit: MAX_LIVE_CODES, fields: ["id"] },
    );
    await em.nativeDelete(EmailCode, { userId: user.id, id: { $nin: kept.map((c) => c.id) } });
    return code;
  }

  private async mailCode(to: string, code: string) {
    await this.deps.mailer.send({
      to,
      subject: `Your Rowbase code: ${code}`,
      text:
        `Your Rowbase verification code is ${code}.\nIt is valid for ${lifetimeText(this.deps.config.CODE_TTL_SECONDS)} and ` +
        "confirms the password chosen when it was requested.\nIf you did not just register " +
        "or ask for a code, do not use it.\n",
    });
  }

  /**
   * Confirms the address with one of the account's live codes, setting the password and name of
   * the registration that code was mailed for. A wrong code counts against every live code.
   */
  async verifyEmail(email: string, code: string): Promise<IssuedSession> {
    const address = normalizeEmail(email);
    // A wrong code must count even though the call fails, so the outcome is returned from the
    // transaction (which commits) and only then turned into an error.
    const user = await this.em().transactional(async (em) => {
      const user = await em.findOne(
        User,
        { email: address },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!user || user.emailVerifiedAt) return undefined;
      const live = await em.find(EmailCode, {
        userId: user.id,
        expiresAt: { $gt: new Date() },
        failedAttempts: { $lt: MAX_CODE_ATTEMPTS },
      });
      const match = live.find((row) => codeMatches(row.codeHash, [user.id], code));
      if (!match) {
        for (const row of live) row.failedAttempts += 1;
        return undefined;
      }
      user.passwordHash = match.passwordHash;
      user.name = match.name;
      user.emailVerifiedAt = new Date();
      await em.nativeDelete(EmailCode, { userId: user.id });
      return user;
    });
    if (!user) throw domainError(Code.InvalidArgument, "invalid_verification_code");
    return this.openSession(user);
  }

  async login(email: string, password: string): Promise<IssuedSession> {
    const user = await this.em().findOne(User, { email: normalizeEmail(email) });
    // Unknown e-mail and wrong password take the same path, time and answer.
    const valid = await verifyPassword(user?.passwordHash ?? null, password);
    if (!user || !valid) throw domainError(Code.Unauthenticated, "invalid_credentials");
    if (!user.emailVerifiedAt) throw domainError(Code.FailedPrecondition, "email_not_verified");
    return this.openSession(user);
  }

  /** Starts a new session family for a signed-in user. */
  async openSession(user: UserRow): Promise<IssuedSession> {
    const refreshToken = newRefreshToken();
    const sessionId = crypto.randomUUID();
    await this.em().transactional(async (em) => {
      // The entities declare no relation, so the session row is written before its token.
      em.create(Session, { id: sessionId, userId: user.id });
      await em.flush();
      em.create(RefreshToken, {
        sessionId,
        tokenHash: sha256Hex(refreshToken),
        expiresAt: this.refreshExpiry(),
      });
    });
    return this.issue(user, sessionId, refreshToken);
  }

  private refreshExpiry(): Date {
    return new Date(Date.now() + this.deps.config.REFRESH_TOKEN_TTL_SECONDS * 1000);
  }

  private async issue(
    user: UserRow,
    sessionId: string,
    refreshToken: string,
  ): Promise<IssuedSession> {
    return {
      accessToken: await this.deps.signer.sign(user.id, sessionId),
      refreshToken,
      expiresIn: this.deps.signer.ttlSeconds,
      user,
    };
  }

  /**
   * Rotates a refresh token. A token that was already rotated is reuse: somebody holds a copy,
   * so the whole session family is revoked.
   */
  async refresh(token: string): Promise<IssuedSession> {
    const next = newRefreshToken();
    const outcome = await this.em().transactional(async (em) => {
      const row = await em.findOne(
        RefreshToken,
        { tokenHash: sha256Hex(token) },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!row) return { kind: "invalid" as const };
      const session = await em.findOne(
        Session,
        { id: row.sessionId },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!session) return { kind: "invalid" as const };
      // Marked again: the mark of the revocation may not have been stored (Redis away then).
      if (session.revokedAt) return { kind: "revoked" as const, sessionId: session.id };
      if (row.usedAt) {
        session.revokedAt = new Date();
        return { kind: "reuse" as const, sessionId: session.id };
      }
      const user = await em.findOne(User, { id: session.userId });
      if (row.expiresAt <= new Date() || !user) return { kind: "invalid" as const };
      row.usedAt = new Date();
      em.create(RefreshToken, {
        sessionId: session.id,
        tokenHash: sha256Hex(next),
        expiresAt: this.refreshExpiry(),
      });
      return { kind: "ok" as const, user, sessionId: session.id };
    });
    if (outcome.kind === "reuse" || outcome.kind === "revoked") {
      await this.markRevoked(outcome.sessionId);
    }
    if (outcome.kind !== "ok") throw domainError(Code.Unauthenticated, "invalid_refresh_token");
    return this.issue(outcome.user, outcome.sessionId, next);
  }

  private async markRevoked(sessionId: string) {
    // Access tokens of the session stay cryptographically valid until they expire; the gateway
    // refuses them through this mark, kept exactly as long as they could live.
    await this.deps.cache.set(revokedSessionKey(sessionId), "1", this.deps.signer.ttlSeconds);
  }

  /** The caller's account, as long as the session it signed in with is alive. */
  async currentUser(userId: bigint, sessionId: string): Promise<UserRow> {
    const em = this.em();
    const session = await em.findOne(Session, { id: sessionId, userId });
    const user = session && !session.revokedAt ? await em.findOne(User, { id: userId }) : null;
    if (!user) throw domainError(Code.Unauthenticated, "unauthorized");
    return user;
  }

  async logout(userId: bigint, sessionId: string): Promise<void> {
    await this.em().nativeUpdate(
      Session,
      { id: sessionId, userId, revokedAt: null },
      { revokedAt: new Date() },
    );
    await this.markRevoked(sessionId);
  }

  async users(ids: bigint[]): Promise<UserRow[]> {
    if (ids.length === 0) return [];
    return this.em().find(User, { id: { $in: ids } }, { orderBy: { id: "asc" } });
  }
}
