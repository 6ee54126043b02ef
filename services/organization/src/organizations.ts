import type { EntityManager } from "@mikro-orm/postgresql";
import { LockMode } from "@mikro-orm/postgresql";
import type { Call } from "@rowbase/kit";
import {
  Code,
  changesBetween,
  domainError,
  membershipCacheKey,
  type Role,
  roleToProto,
  SUBJECTS,
  textProblemCode,
  validationFailed,
  valuesRemoved,
  valuesSet,
} from "@rowbase/kit";
import {
  ApiTokenRevokedSchema,
  MemberAddedSchema,
  MemberRemovedSchema,
  OrganizationCreatedSchema,
  OrganizationDeletedSchema,
  OrganizationUpdatedSchema,
  PlanChangedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { authorize } from "./access.js";
import type { Transactions, UserCall } from "./change-set.js";
import { lockOwnedOrganizations, ownedOrganizations, violates } from "./db/constraints.js";
import { ApiToken, Member, Organization, type OrganizationRow } from "./db/entities.js";
import {
  enterpriseLimitProblems,
  limitsOf,
  MAX_OWNED_ORGANIZATIONS,
  type Plan,
  type PlanLimits,
  storedLimits,
} from "./domain/plans.js";
import { isSlug, slugCandidate, slugFromName } from "./domain/slugs.js";
import { requiredName } from "./domain/validation.js";
import { monthlyUsage } from "./usage-stats.js";
import { limitsToProto, planToProto } from "./wire.js";

/** An organization as its caller sees it. */
export interface OrganizationView {
  organization: OrganizationRow;
  role: Role;
}

/** Usage against the plan, key for key with the plan's limits. */
export interface Usage {
  records: bigint;
  apiCallsThisMonth: bigint;
  fileStorageBytes: bigint;
  transferBytesThisMonth: bigint;
  members: bigint;
}

export interface LimitsView {
  plan: Plan;
  limits: PlanLimits;
  usage: Usage;
}

export interface Membership {
  memberId: bigint;
  role: Role;
}

/** Derived slugs are retried this often when a parallel create takes the chosen one. */
const SLUG_ATTEMPTS = 5;
/** Derived slug candidates checked per query. */
const SLUG_BATCH = 20;

const SLUG_MESSAGE = "must be 3-48 characters of a-z, 0-9 and '-'";

function notFound() {
  return domainError(Code.NotFound, "organization_not_found");
}

function slugTaken() {
  return domainError(Code.AlreadyExists, "organization_slug_taken");
}

function requiredSlug(raw: string): string {
  if (!isSlug(raw)) {
    throw validationFailed([
      {
        key: "organization_slug",
        message: SLUG_MESSAGE,
        source: "body",
        code: textProblemCode(raw, SLUG_MESSAGE),
      },
    ]);
  }
  return raw;
}

/** The first of `acme`, `acme-2`, `acme-3`, ... that no organization uses. */
async function freeSlug(em: EntityManager, base: string): Promise<string> {
  for (let first = 1; ; first += SLUG_BATCH) {
    const candidates = Array.from({ length: SLUG_BATCH }, (_, i) => slugCandidate(base, first + i));
    const taken = new Set(
      (await em.find(Organization, { slug: { $in: candidates } }, { fields: ["slug"] })).map(
        (o) => o.slug,
      ),
    );
    const free = candidates.find((slug) => !taken.has(slug));
    if (free) return free;
  }
}

/** How many records an organization holds (the records service's count). */
export type RecordUsageLookup = (organizationId: bigint, requestId: string) => Promise<bigint>;

/** How many bytes of files an organization stores (the files service's count). */
export type StorageUsageLookup = (organizationId: bigint, requestId: string) => Promise<bigint>;

/** Organizations: create, read, rename, delete; plans, limits and usage; memberships. */
export class Organizations {
  constructor(
    private readonly deps: {
      tx: Transactions;
      /** Absent until records runs: records usage then reads the local counter (0). */
      recordUsage?: RecordUsageLookup | undefined;
      /** Absent until files runs: storage usage then reads the local counter (0). */
      storageUsage?: StorageUsageLookup | undefined;
    },
  ) {}

  /**
   * Creates an organization on the free plan with the caller as its owner. The owner count is
   * read under a per-user lock, so parallel creates cannot pass the limit.
   */
  async create(call: UserCall, rawName: string, rawSlug: string): Promise<OrganizationView> {
    const name = requiredName(rawName);
    const explicit = rawSlug === "" ? undefined : requiredSlug(rawSlug);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.deps.tx.run(call, async (changes) => {
          const { em } = changes;
          await lockOwnedOrganizations(em, call.userId);
          if ((await ownedOrganizations(em, call.userId)) >= MAX_OWNED_ORGANIZATIONS) {
            throw domainError(Code.ResourceExhausted, "organization_limit_exceeded");
          }
          if (explicit && (await em.count(Organization, { slug: explicit })) > 0) {
            throw slugTaken();
          }
          const slug = explicit ?? (await freeSlug(em, slugFromName(name)));
          const organization = em.create(Organization, {
            slug,
            name,
            plan: "free",
            enterpriseLimits: null,
          });
          await em.flush();
          const owner = em.create(Member, {
            organizationId: organization.id,
            userId: call.userId,
            role: "owner",
          });
          await em.flush();
          await em.execute("insert into organization_usage (organization_id) values (?)", [
            organization.id,
          ]);
          await changes.publish(SUBJECTS.organizationCreated, OrganizationCreatedSchema, {
            organizationId: organization.id,
            organizationSlug: slug,
            name,
            ownerUserId: call.userId,
            plan: planToProto("free"),
          });
          await changes.publish(SUBJECTS.memberAdded, MemberAddedSchema, {
            organizationId: organization.id,
            memberId: owner.id,
            userId: call.userId,
            role: roleToProto("owner"),
          });
          await changes.audit(
            organization.id,
            "organization.created",
            { type: "organization", id: organization.id },
            valuesSet({ name, organization_slug: slug, plan: "free" }),
          );
          await changes.audit(
            organization.id,
            "member.added",
            { type: "member", id: owner.id },
            valuesSet({ user_id: Number(call.userId), role: "owner" }),
          );
          changes.evict(membershipCacheKey(organization.id, call.userId));
          return { organization, role: "owner" as const };
        });
      } catch (error) {
        if (violates(error, "organizations_slug_key")) {
          if (explicit) throw slugTaken();
          if (attempt < SLUG_ATTEMPTS) continue;
        }
        throw error;
      }
    }
  }

  /** One of the caller's organizations; anyone else's does not exist for them. */
  async get(
    call: UserCall,
    lookup: { organizationId: bigint } | { slug: string },
  ): Promise<OrganizationView> {
    const em = this.deps.tx.em();
    const organization = await em.findOne(
      Organization,
      "slug" in lookup ? { slug: lookup.slug } : { id: lookup.organizationId },
    );
    const member = organization
      ? await em.findOne(Member, { organizationId: organization.id, userId: call.userId })
      : null;
    if (!organization || !member) throw notFound();
    return { organization, role: member.role };
  }

  /** The caller's organizations, oldest first. */
  async list(call: UserCall): Promise<OrganizationView[]> {
    const em = this.deps.tx.em();
    const memberships = await em.find(Member, { userId: call.userId });
    if (memberships.length === 0) return [];
    const roles = new Map(memberships.map((m) => [m.organizationId, m.role]));
    const organizations = await em.find(
      Organization,
      { id: { $in: [...roles.keys()] } },
      { orderBy: { id: "asc" } },
    );
    return organizations.map((organization) => ({
      organization,
      role: roles.get(organization.id)!,
    }));
  }

  async update(
    call: UserCall,
    organizationId: bigint,
    patch: { name?: string; slug?: string },
  ): Promise<OrganizationView> {
    const name = patch.name === undefined ? undefined : requiredName(patch.name);
    const slug = patch.slug === undefined ? undefined : requiredSlug(patch.slug);
    try {
      return await this.deps.tx.run(call, async (changes) => {
        const { em } = changes;
        // Locked: parallel renames run one at a time, so each audits the values it replaced,
        // and a rename waiting on a deletion finds nothing rather than announcing a ghost.
        const { organization, role } = await authorize(
          em,
          organizationId,
          call.userId,
          "manage",
          "organization_not_found",
          { lock: true },
        );
        const before = { name: organization.name, organization_slug: organization.slug };
        if (
          slug !== undefined &&
          slug !== organization.slug &&
          (await em.count(Organization, { slug })) > 0
        ) {
          throw slugTaken();
        }
        if (name !== undefined) organization.name = name;
        if (slug !== undefined) organization.slug = slug;
        const changed = changesBetween(before, {
          name: organization.name,
          organization_slug: organization.slug,
        });
        if (changed.length === 0) return { organization, role };
        await em.flush();
        await changes.publish(SUBJECTS.organizationUpdated, OrganizationUpdatedSchema, {
          organizationId,
          organizationSlug: organization.slug,
          name: organization.name,
        });
        await changes.audit(
          organizationId,
          "organization.updated",
          { type: "organization", id: organizationId },
          changed,
        );
        return { organization, role };
      });
    } catch (error) {
      if (violates(error, "organizations_slug_key")) throw slugTaken();
      throw error;
    }
  }

  /**
   * Deletes the organization with its members, invites and tokens (foreign keys cascade).
   * Announcing it starts the saga in which the other services delete what they hold for it;
   * every membership and token it had is announced as removed and revoked, for their caches,
   * and its shared plan entry is marked deleted, which readers take for its absence at once.
   */
  async delete(call: UserCall, organizationId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { organization } = await authorize(
        em,
        organizationId,
        call.userId,
        "own",
        "organization_not_found",
        { lock: true },
      );
      const members = await em.find(Member, { organizationId });
      const tokens = await em.find(ApiToken, { organizationId, revokedAt: null });
      await em.nativeDelete(Organization, { id: organizationId });
      for (const member of members) {
        await changes.publish(SUBJECTS.memberRemoved, MemberRemovedSchema, {
          organizationId,
          memberId: member.id,
          userId: member.userId,
        });
        changes.evict(membershipCacheKey(organizationId, member.userId));
      }
      for (const token of tokens) {
        await changes.publish(SUBJECTS.apiTokenRevoked, ApiTokenRevokedSchema, {
          organizationId,
          tokenId: token.id,
          tokenSha256: Buffer.from(token.tokenHash, "hex"),
        });
        changes.revokeCachedToken(token.tokenHash);
      }
      await changes.publish(SUBJECTS.organizationDeleted, OrganizationDeletedSchema, {
        organizationId,
      });
      changes.organizationDeleted(organizationId);
      await changes.audit(
        organizationId,
        "organization.deleted",
        { type: "organization", id: organizationId },
        valuesRemoved({ name: organization.name, organization_slug: organization.slug }),
      );
    });
  }

  /** The plan, its limits and what the organization uses; any member may read it. */
  async limits(call: UserCall, organizationId: bigint): Promise<LimitsView> {
    const em = this.deps.tx.em();
    const { organization } = await authorize(
      em,
      organizationId,
      call.userId,
      "read",
      "organization_not_found",
    );
    const members = await em.count(Member, { organizationId });
    const [row] = await em.execute<{ records: string; file_storage_bytes: string }[]>(
      "select records, file_storage_bytes from organization_usage where organization_id = ?",
      [organizationId],
    );
    // This UTC month's calls and transfer, as aggregated from the gateway's usage events.
    const monthly = await monthlyUsage(em, organizationId);
    const [records, fileStorageBytes] = await Promise.all([
      this.deps.recordUsage
        ? this.deps.recordUsage(organizationId, call.requestId)
        : BigInt(row?.records ?? 0),
      this.deps.storageUsage
        ? this.deps.storageUsage(organizationId, call.requestId)
        : BigInt(row?.file_storage_bytes ?? 0),
    ]);
    return {
      plan: organization.plan,
      limits: limitsOf(organization.plan, organization.enterpriseLimits),
      usage: {
        records,
        apiCallsThisMonth: monthly.apiCalls,
        fileStorageBytes,
        transferBytesThisMonth: monthly.transferBytes,
        members: BigInt(members),
      },
    };
  }

  /** Internal: the plan and limits in force and their version, for quota checks elsewhere. */
  async plan(
    organizationId: bigint,
  ): Promise<{ plan: Plan; limits: PlanLimits; planVersion: bigint }> {
    const organization = await this.deps.tx.em().findOne(Organization, { id: organizationId });
    if (!organization) throw notFound();
    return {
      plan: organization.plan,
      limits: limitsOf(organization.plan, organization.enterpriseLimits),
      planVersion: organization.planVersion,
    };
  }

  /**
   * Operator: moves an organization to another plan. Enterprise takes its limits from the
   * call; the other plans have fixed limits and refuse any.
   */
  async setPlan(
    context: Call,
    organizationId: bigint,
    plan: Plan | undefined,
    enterpriseLimits: PlanLimits | undefined,
  ): Promise<{ plan: Plan; limits: PlanLimits }> {
    if (!plan) {
      throw validationFailed([
        {
          key: "plan",
          message: "must be free, plus, business or enterprise",
          source: "body",
          code: "invalid_value",
        },
      ]);
    }
    if (plan === "enterprise" && !enterpriseLimits) {
      throw validationFailed([
        {
          key: "enterprise_limits",
          message: "required for the enterprise plan",
          source: "body",
          code: "required",
        },
      ]);
    }
    if (plan !== "enterprise" && enterpriseLimits) {
      throw validationFailed([
        {
          key: "enterprise_limits",
          message: "only the enterprise plan takes limits",
          source: "body",
          code: "unknown_key",
        },
      ]);
    }
    if (enterpriseLimits) {
      const problems = enterpriseLimitProblems(enterpriseLimits);
      if (problems.length > 0) {
        throw validationFailed(
          problems.map((p) => ({
            key: `enterprise_limits.${p.key}`,
            message: p.message,
            source: "body" as const,
            code: "out_of_range" as const,
          })),
        );
      }
    }
    return this.deps.tx.run(context, async (changes) => {
      const { em } = changes;
      const organization = await em.findOne(
        Organization,
        { id: organizationId },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!organization) throw notFound();
      const before = {
        plan: organization.plan,
        enterprise_limits: organization.enterpriseLimits ?? null,
      };
      organization.plan = plan;
      organization.enterpriseLimits = enterpriseLimits ? storedLimits(enterpriseLimits) : null;
      const limits = limitsOf(plan, organization.enterpriseLimits);
      const changed = changesBetween(before, {
        plan,
        enterprise_limits: organization.enterpriseLimits ?? null,
      });
      if (changed.length > 0) {
        organization.planVersion += 1n;
        await em.flush();
        await changes.publish(SUBJECTS.planChanged, PlanChangedSchema, {
          organizationId,
          plan: planToProto(plan),
          limits: limitsToProto(limits),
        });
        changes.planChanged(organizationId, organization.planVersion, limitsToProto(limits));
        await changes.audit(
          organizationId,
          "organization.plan_changed",
          { type: "organization", id: organizationId },
          changed,
        );
      }
      return { plan, limits };
    });
  }

  /** Internal: a user's membership, or undefined for a non-member or a missing organization. */
  async membership(organizationId: bigint, userId: bigint): Promise<Membership | undefined> {
    const member = await this.deps.tx.em().findOne(Member, { organizationId, userId });
    return member ? { memberId: member.id, role: member.role } : undefined;
  }
}
