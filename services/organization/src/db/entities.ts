import { defineEntity, type InferEntity, p } from "@mikro-orm/postgresql";
import type { StoredLimits } from "../domain/plans.js";

const ROLES = ["owner", "admin", "editor", "viewer"] as const;
const PLANS = ["free", "plus", "business", "enterprise"] as const;
/** `expired` is written lazily, when a pending invite past expires_at is next touched. */
const INVITE_STATUSES = ["pending", "accepted", "declined", "canceled", "expired"] as const;
const TOKEN_ACCESS = ["read", "read_write"] as const;

export const Organization = defineEntity({
  name: "Organization",
  tableName: "organizations",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    slug: p.text().unique(),
    name: p.text(),
    plan: p.enum(PLANS).columnType("text").default("free"),
    /** Set exactly when the plan is enterprise. */
    enterpriseLimits: p.json<StoredLimits>().nullable(),
    /** Goes up with every change of the plan or its limits (the plan cache's version). */
    planVersion: p.bigint().columnType("bigint").default(0),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export const Member = defineEntity({
  name: "Member",
  tableName: "members",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    organizationId: p.bigint().columnType("bigint"),
    userId: p.bigint().columnType("bigint"),
    role: p.enum(ROLES).columnType("text"),
    joinedAt: p.datetime().onCreate(() => new Date()),
  },
});

export const Invite = defineEntity({
  name: "Invite",
  tableName: "invites",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    organizationId: p.bigint().columnType("bigint"),
    email: p.text(),
    role: p.enum(ROLES).columnType("text"),
    status: p.enum(INVITE_STATUSES).columnType("text").default("pending"),
    invitedBy: p.bigint().columnType("bigint"),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime(),
    respondedAt: p.datetime().nullable(),
  },
});

/** The one live owner-transfer code of an organization (a new code replaces it). */
export const TransferCode = defineEntity({
  name: "TransferCode",
  tableName: "transfer_codes",
  properties: {
    organizationId: p.bigint().primary().columnType("bigint"),
    targetMemberId: p.bigint().columnType("bigint"),
    codeHash: p.text(),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime(),
    failedAttempts: p.integer().default(0),
  },
});

export const ApiToken = defineEntity({
  name: "ApiToken",
  tableName: "api_tokens",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    organizationId: p.bigint().columnType("bigint"),
    name: p.text(),
    access: p.enum(TOKEN_ACCESS).columnType("text"),
    /** SHA-256 of the secret, hex; the secret itself is never stored. */
    tokenHash: p.text().unique(),
    tokenPrefix: p.text(),
    createdBy: p.bigint().columnType("bigint"),
    createdAt: p.datetime().onCreate(() => new Date()),
    lastUsedAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
  },
});

export const entities = [Organization, Member, Invite, TransferCode, ApiToken];

export type OrganizationRow = InferEntity<typeof Organization>;
export type MemberRow = InferEntity<typeof Member>;
export type InviteRow = InferEntity<typeof Invite>;
export type ApiTokenRow = InferEntity<typeof ApiToken>;
