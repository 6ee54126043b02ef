import { fromBinary } from "@bufbuild/protobuf";
import { MemberRemovedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import type { EventBus } from "./bus.js";
import type { Cache } from "./cache.js";
import { Code, domainError } from "./errors.js";
import { SUBJECTS } from "./events.js";
import type { Principal } from "./principal.js";

export type Role = "owner" | "admin" | "editor" | "viewer";

/**
 * What an operation needs (the role table of docs/conventions.md):
 * - `read`: organization, members, databases, tables, fields, records, files, audit;
 * - `write`: create/update/delete databases, tables, fields, records and files;
 * - `manage`: invites, member roles and removal, API tokens, organization update;
 * - `own`: organization delete, owner transfer, giving or changing the admin role.
 */
export type Permission = "read" | "write" | "manage" | "own";

const LEVEL: Record<Role, number> = { viewer: 0, editor: 1, admin: 2, owner: 3 };
const NEEDED: Record<Permission, number> = { read: 0, write: 1, manage: 2, own: 3 };

export function allows(role: Role, permission: Permission): boolean {
  return LEVEL[role] >= NEEDED[permission];
}

/** Answers a user's role in an organization, or undefined for a non-member. */
export type MembershipLookup = (
  organizationId: bigint,
  userId: bigint,
) => Promise<Role | undefined>;

export function membershipCacheKey(organizationId: bigint, userId: bigint): string {
  return `membership:${organizationId}:${userId}`;
}

const NOT_A_MEMBER = "-";

/**
 * What a changed membership's cache entry says for MEMBERSHIP_CHANGED_SECONDS: "ask the
 * organization service". Roles are only added where no entry is, so a lookup that read the old
 * role just before the change cannot put it back; meanwhile every call asks.
 */
export const MEMBERSHIP_CHANGED = "?";
export const MEMBERSHIP_CHANGED_SECONDS = 10;

/**
 * The role check every service makes (the gateway authenticates, services authorize). Roles
 * are cached in the shared cache for a few seconds; the organization service marks the entry
 * MEMBERSHIP_CHANGED when it changes a membership, and member events mark it again, so a removed
 * member loses access at once.
 */
export class Authorizer {
  constructor(
    private readonly lookup: MembershipLookup,
    private readonly cache: Cache,
    private readonly ttlSeconds = 5,
  ) {}

  /** The caller's role in the organization; an API token acts as editor or viewer of its own. */
  async roleOf(principal: Principal, organizationId: bigint): Promise<Role | undefined> {
    if (principal.kind === "api_token") {
      if (principal.organizationId !== organizationId) return undefined;
      return principal.access === "read_write" ? "editor" : "viewer";
    }
    if (principal.kind !== "user") return undefined;
    const key = membershipCacheKey(organizationId, principal.userId);
    // A cache that fails (Redis down) is skipped: the organization service decides.
    const cached = await this.cache.get(key).catch(() => null);
    if (cached && cached !== MEMBERSHIP_CHANGED) {
      return cached === NOT_A_MEMBER ? undefined : (cached as Role);
    }
    const role = await this.lookup(organizationId, principal.userId);
    await this.cache.setIfAbsent(key, role ?? NOT_A_MEMBER, this.ttlSeconds).catch(() => {});
    return role;
  }

  /**
   * The caller's role if it may do `permission` in the organization. A non-member gets the
   * resource's 404 (`notFound`, existence is not leaked across tenants), a read token on a write
   * `token_read_only`, a member without the right `organization_forbidden`.
   */
  async authorize(
    principal: Principal,
    organizationId: bigint,
    permission: Permission,
    notFound: string,
  ): Promise<Role> {
    const role = await this.roleOf(principal, organizationId);
    if (!role) throw domainError(Code.NotFound, notFound);
    if (allows(role, permission)) return role;
    if (principal.kind === "api_token" && permission === "write") {
      throw domainError(Code.PermissionDenied, "token_read_only");
    }
    throw domainError(Code.PermissionDenied, "organization_forbidden");
  }

  /** Forgets a cached role, leaving MEMBERSHIP_CHANGED (see there) in its place. */
  async evict(organizationId: bigint, userId: bigint): Promise<void> {
    await markMembershipChanged(this.cache, [membershipCacheKey(organizationId, userId)]);
  }

  /**
   * Evicts on every member event, closing the window in which a lookup that raced a change
   * could have cached the old role. `durable` names this service's consumer.
   */
  async listen(bus: EventBus, durable: string): Promise<{ stop(): Promise<void> }> {
    return bus.consume({ stream: "ORG", durable, subject: SUBJECTS.memberAny }, async (message) => {
      // Every member event starts with meta, organization_id, member_id, user_id.
      const event = fromBinary(MemberRemovedSchema, message.data);
      await this.evict(event.organizationId, event.userId);
    });
  }
}

/** Replaces the cached roles at `keys` with MEMBERSHIP_CHANGED (the organization service's commit). */
export async function markMembershipChanged(cache: Cache, keys: Iterable<string>): Promise<void> {
  await Promise.all(
    [...keys].map((key) => cache.set(key, MEMBERSHIP_CHANGED, MEMBERSHIP_CHANGED_SECONDS)),
  );
}
