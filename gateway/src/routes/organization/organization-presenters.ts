import type {
  Invite,
  Member,
  Organization,
  PlanLimits,
  PlanUsage,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { GetLimitsResponse } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { z } from "zod";
import {
  assignableRoleName,
  inviteStatusName,
  planName,
  roleName,
} from "../../presentation/organization-enums.js";
import { countOf, idOf, required, timeOf } from "../../presentation/wire-values.js";
import type {
  OrganizationSchema,
  OrgInviteSchema,
  OrgLimitsSchema,
  OrgMemberSchema,
  PlanLimitsSchema,
  PlanUsageSchema,
} from "./organization-schemas.js";

/** `organization` is the response field that carries it; missing, it is a service bug (500). */
export function presentOrganization(
  organization: Organization | undefined,
): z.output<typeof OrganizationSchema> {
  const o = required(organization, "organization");
  return {
    organization_id: idOf(o.organizationId),
    organization_slug: o.organizationSlug,
    name: o.name,
    plan: planName(o.plan),
    role: roleName(o.role),
    created_at: timeOf(o.createdAt),
    updated_at: timeOf(o.updatedAt),
  };
}

export function presentMember(member: Member): z.output<typeof OrgMemberSchema> {
  return {
    member_id: idOf(member.memberId),
    user_id: idOf(member.userId),
    email: member.email,
    name: member.name,
    role: roleName(member.role),
    joined_at: timeOf(member.joinedAt),
  };
}

export function presentInvite(invite: Invite | undefined): z.output<typeof OrgInviteSchema> {
  const i = required(invite, "invite");
  return {
    invite_id: idOf(i.inviteId),
    organization_id: idOf(i.organizationId),
    organization_name: i.organizationName,
    email: i.email,
    role: assignableRoleName(i.role),
    status: inviteStatusName(i.status),
    created_at: timeOf(i.createdAt),
    expires_at: timeOf(i.expiresAt),
  };
}

function presentPlanLimits(limits: PlanLimits): z.output<typeof PlanLimitsSchema> {
  return {
    records: countOf(limits.records),
    api_calls_per_month: countOf(limits.apiCallsPerMonth),
    file_storage_bytes: countOf(limits.fileStorageBytes),
    transfer_bytes_per_month: countOf(limits.transferBytesPerMonth),
    members: countOf(limits.members),
    max_file_bytes: countOf(limits.maxFileBytes),
    change_streams: countOf(limits.changeStreams),
    webhooks: countOf(limits.webhooks),
    forms: countOf(limits.forms),
  };
}

function presentPlanUsage(usage: PlanUsage): z.output<typeof PlanUsageSchema> {
  return {
    records: countOf(usage.records),
    api_calls_this_month: countOf(usage.apiCallsThisMonth),
    file_storage_bytes: countOf(usage.fileStorageBytes),
    transfer_bytes_this_month: countOf(usage.transferBytesThisMonth),
    members: countOf(usage.members),
  };
}

/** OrgLimitsResponse data: the plan, what it allows and what is used (docs/limits.md keys). */
export function presentLimits(response: GetLimitsResponse): z.output<typeof OrgLimitsSchema> {
  return {
    plan: planName(response.plan),
    limits: presentPlanLimits(required(response.limits, "limits")),
    usage: presentPlanUsage(required(response.usage, "usage")),
  };
}
