import {
  Code,
  changesBetween,
  domainError,
  SUBJECTS,
  sha256Hex,
  validationFailed,
  valuesSet,
} from "@rowbase/kit";
import {
  ApiTokenCreatedSchema,
  ApiTokenRevokedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { authorize } from "./access.js";
import type { ChangeSet, Transactions, UserCall } from "./change-set.js";
import { ApiToken, type ApiTokenRow } from "./db/entities.js";
import { newApiTokenSecret, TOKEN_PREFIX_LENGTH } from "./domain/secrets.js";
import { requiredName } from "./domain/validation.js";
import { type Access, accessToProto } from "./wire.js";

/** `last_used_at` is written at most this often per token, not on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

function tokenNotFound() {
  return domainError(Code.NotFound, "api_token_not_found");
}

/** What the gateway needs to act for a presented token. */
export interface ResolvedToken {
  tokenId: bigint;
  organizationId: bigint;
  access: Access;
}

/** API tokens: secrets shown once at creation and stored only as SHA-256. */
export class ApiTokens {
  constructor(private readonly deps: { tx: Transactions }) {}

  async create(
    call: UserCall,
    organizationId: bigint,
    rawName: string,
    access: Access | undefined,
  ): Promise<{ token: ApiTokenRow; secret: string }> {
    const name = requiredName(rawName);
    if (!access) {
      throw validationFailed([
        {
          key: "access",
          message: "must be read or read_write",
          source: "body",
          code: "invalid_value",
        },
      ]);
    }
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      // The organization's row, locked as every membership change locks it: a removal or
      // demotion of the creator either commits first (refused here) or waits for this token,
      // which it then revokes with the creator's others. Also an organization deleted
      // meanwhile is not found rather than a foreign-key failure.
      await authorize(em, organizationId, call.userId, "manage", "organization_not_found", {
        lock: true,
      });
      const secret = newApiTokenSecret();
      const token = em.create(ApiToken, {
        organizationId,
        name,
        access,
        tokenHash: sha256Hex(secret),
        tokenPrefix: secret.slice(0, TOKEN_PREFIX_LENGTH),
        createdBy: call.userId,
        lastUsedAt: null,
        revokedAt: null,
      });
      await em.flush();
      await changes.publish(SUBJECTS.apiTokenCreated, ApiTokenCreatedSchema, {
        organizationId,
        tokenId: token.id,
        name: token.name,
        access: accessToProto(access),
      });
      await changes.audit(
        organizationId,
        "api_token.created",
        { type: "api_token", id: token.id },
        valuesSet({ name: token.name, access, token_prefix: token.tokenPrefix }),
      );
      return { token, secret };
    });
  }

  /** The organization's live tokens, oldest first; never their secrets. */
  async list(call: UserCall, organizationId: bigint): Promise<ApiTokenRow[]> {
    const em = this.deps.tx.em();
    await authorize(em, organizationId, call.userId, "manage", "organization_not_found");
    return em.find(ApiToken, { organizationId, revokedAt: null }, { orderBy: { id: "asc" } });
  }

  /**
   * Revokes a token of this organization; a token of another organization, or one already
   * revoked (a parallel revocation included), is not found. The gateways' shared cache entry
   * is deleted after the commit; what a gateway keeps in its own memory lives a second.
   */
  async revoke(call: UserCall, organizationId: bigint, tokenId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      // Locked as a removal that revokes the creator's tokens locks it: of two revocations of
      // one token, the second then finds it revoked (not found) instead of revoking it again.
      await authorize(em, organizationId, call.userId, "manage", "api_token_not_found", {
        lock: true,
      });
      const token = await em.findOne(ApiToken, { id: tokenId, organizationId, revokedAt: null });
      if (!token) throw tokenNotFound();
      await revokeToken(changes, token);
    });
  }

  /** Internal: the live token whose secret hashes to `sha256`, for the gateway. */
  async resolve(sha256: Uint8Array): Promise<ResolvedToken> {
    if (sha256.length !== 32) throw tokenNotFound();
    const em = this.deps.tx.em();
    const token = await em.findOne(ApiToken, {
      tokenHash: Buffer.from(sha256).toString("hex"),
      revokedAt: null,
    });
    if (!token) throw tokenNotFound();
    const now = new Date();
    const stale = new Date(now.getTime() - LAST_USED_RESOLUTION_MS);
    await em.nativeUpdate(
      ApiToken,
      { id: token.id, $or: [{ lastUsedAt: null }, { lastUsedAt: { $lt: stale } }] },
      { lastUsedAt: now },
    );
    return { tokenId: token.id, organizationId: token.organizationId, access: token.access };
  }
}

/**
 * Marks a live token revoked in the caller's transaction: announced with ApiTokenRevoked (on
 * the ORG stream, for any consumer of token changes; none of ours needs it), audited, and its
 * shared cache entry deleted after the commit.
 */
async function revokeToken(changes: ChangeSet, token: ApiTokenRow): Promise<void> {
  token.revokedAt = new Date();
  await changes.em.flush();
  await changes.publish(SUBJECTS.apiTokenRevoked, ApiTokenRevokedSchema, {
    organizationId: token.organizationId,
    tokenId: token.id,
    tokenSha256: Buffer.from(token.tokenHash, "hex"),
  });
  await changes.audit(
    token.organizationId,
    "api_token.revoked",
    { type: "api_token", id: token.id },
    changesBetween({ revoked: false }, { revoked: true }),
  );
  changes.revokeCachedToken(token.tokenHash);
}

/**
 * Revokes the live tokens `userId` created in the organization, in the caller's transaction. A
 * token lives only as long as its creator may manage tokens there: one who is removed, leaves,
 * or gets a role below admin takes their tokens with them (as a user leaving a Baserow
 * workspace does), so that nobody keeps reaching an organization's records through a token
 * after their own access was cut.
 */
export async function revokeTokensCreatedBy(
  changes: ChangeSet,
  organizationId: bigint,
  userId: bigint,
): Promise<void> {
  const tokens = await changes.em.find(
    ApiToken,
    { organizationId, createdBy: userId, revokedAt: null },
    { orderBy: { id: "asc" } },
  );
  for (const token of tokens) await revokeToken(changes, token);
}
