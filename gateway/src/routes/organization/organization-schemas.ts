import { z } from "zod";
import {
  ASSIGNABLE_ROLES,
  INVITE_STATUSES,
  PLANS,
  ROLES,
} from "../../presentation/organization-enums.js";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import {
  bodyId,
  email,
  name,
  oneOf,
  organizationSlug,
  queryId,
  verificationCode,
} from "../../validation/fields.js";

/** Query parameters of the organization routes. */

const organizationId = queryId.describe("The organization");

export const OrganizationIdQuery = z.strictObject({ organization_id: organizationId });

/**
 * `/organization/get` finds an organization by exactly one of its id and its slug; the output
 * is the oneof of GetOrganizationRequest.
 */
export const OrganizationGetQuery = z
  .strictObject({
    organization_id: queryId.optional().describe("The organization; or give organization_slug"),
    organization_slug: organizationSlug
      .optional()
      .describe("The organization's slug; or give organization_id"),
  })
  .transform(({ organization_id: id, organization_slug: slug }, ctx) => {
    if (id !== undefined && slug === undefined) {
      return { case: "organizationId", value: id } as const;
    }
    if (slug !== undefined && id === undefined) {
      return { case: "organizationSlug", value: slug } as const;
    }
    ctx.addIssue({
      code: "custom",
      path: id === undefined ? ["organization_id"] : ["organization_slug"],
      message:
        id === undefined
          ? "organization_id or organization_slug is required"
          : "must not be given together with organization_id",
      input: slug,
    });
    return z.NEVER;
  });

export const InviteIdQuery = z.strictObject({
  organization_id: organizationId,
  invite_id: queryId.describe("The invite"),
});

export const MyInviteIdQuery = z.strictObject({
  invite_id: queryId.describe("An invite addressed to the caller's e-mail"),
});

export const MemberIdQuery = z.strictObject({
  organization_id: organizationId,
  member_id: queryId.describe("The member (not the user id)"),
});

/** Request bodies, under their published schema names. */

export const OrganizationCreateSchema = requestBody(
  "OrganizationCreateSchema",
  z.strictObject({
    name,
    organization_slug: organizationSlug.optional(),
  }),
  "Without organization_slug, one is derived from the name.",
);

export const OrganizationUpdateSchema = requestBody(
  "OrganizationUpdateSchema",
  z.strictObject({
    name: name.optional(),
    organization_slug: organizationSlug.optional(),
  }),
  "Keys left out keep their value.",
);

const assignableRole = oneOf(ASSIGNABLE_ROLES).describe(
  "The owner changes only by transfer, so `owner` is refused",
);

export const InviteCreateSchema = requestBody(
  "InviteCreateSchema",
  z.strictObject({ email, role: assignableRole }),
);

export const OrgMemberUpdateSchema = requestBody(
  "OrgMemberUpdateSchema",
  z.strictObject({ role: assignableRole }),
);

const transferee = bodyId.describe("The member who is to become the owner");

export const OwnerTransferCodeRequestSchema = requestBody(
  "OwnerTransferCodeRequestSchema",
  z.strictObject({ member_id: transferee }),
);

export const OwnerTransferConfirmSchema = requestBody(
  "OwnerTransferConfirmSchema",
  z.strictObject({
    member_id: transferee,
    code: verificationCode.describe("The code mailed to the owner by transfer/send_code"),
  }),
);

/** Response `data` of the organization routes. */

const id = z.number().int();
const time = z.iso.datetime();

export const OrganizationSchema = responseData(
  "Organization",
  z.object({
    organization_id: id,
    organization_slug: z.string(),
    name: z.string(),
    plan: z.enum(PLANS),
    role: z.enum(ROLES).describe("The caller's role in the organization"),
    created_at: time,
    updated_at: time,
  }),
);

export const OrganizationGetSchema = responseData(
  "OrganizationGet",
  z.object({ organization: OrganizationSchema }),
);

export const OrganizationListSchema = responseData(
  "OrganizationList",
  z.object({ organizations: z.array(OrganizationSchema) }),
);

export const OwnerTransferSchema = responseData(
  "OwnerTransfer",
  z.object({ organization: OrganizationSchema }),
  "The organization as its former owner, now an admin, sees it.",
);

export const OrgMemberSchema = responseData(
  "OrgMember",
  z.object({
    member_id: id,
    user_id: id,
    email: z.string(),
    name: z.string(),
    role: z.enum(ROLES),
    joined_at: time,
  }),
);

export const OrgMemberListSchema = responseData(
  "OrgMemberList",
  z.object({ members: z.array(OrgMemberSchema) }),
);

export const OrgInviteSchema = responseData(
  "OrgInvite",
  z.object({
    invite_id: id,
    organization_id: id,
    organization_name: z.string(),
    email: z.string(),
    role: z.enum(ASSIGNABLE_ROLES),
    status: z.enum(INVITE_STATUSES),
    created_at: time,
    expires_at: time,
  }),
);

/** `{"invite"}`, whose envelope is InviteResponse. */
export const InviteSchema = responseData("Invite", z.object({ invite: OrgInviteSchema }));

export const PendingInviteListSchema = responseData(
  "PendingInviteList",
  z.object({ invites: z.array(OrgInviteSchema) }),
);

const count = z.number().int();

export const PlanLimitsSchema = responseData(
  "PlanLimits",
  z.object({
    records: count,
    api_calls_per_month: count,
    file_storage_bytes: count,
    transfer_bytes_per_month: count,
    members: count.describe("The owner counts as a member"),
    max_file_bytes: count,
    change_streams: count.describe("Change streams of the organization's tables open at once"),
    webhooks: count.describe("Webhooks of the organization's tables"),
    forms: count.describe("Forms across the organization's tables"),
  }),
);

export const PlanUsageSchema = responseData(
  "PlanUsage",
  z.object({
    records: count,
    api_calls_this_month: count,
    file_storage_bytes: count,
    transfer_bytes_this_month: count,
    members: count,
  }),
);

export const OrgLimitsSchema = responseData(
  "OrgLimits",
  z.object({ plan: z.enum(PLANS), limits: PlanLimitsSchema, usage: PlanUsageSchema }),
);
