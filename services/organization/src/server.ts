import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import {
  requestIdOf,
  requireOperator,
  requirePrincipal,
  requireService,
  requireUser,
  roleFromProto,
  roleToProto,
  validationFailed,
} from "@rowbase/kit";
import {
  type ApiToken,
  ApiTokenSchema,
  type Invite,
  InviteSchema,
  type Member,
  MemberSchema,
  type Organization,
  OrganizationSchema,
  PlanUsageSchema,
  Role,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { ApiTokens } from "./api-tokens.js";
import type { AuditLog } from "./audit-log.js";
import { toApiStats, toAuditLogEntry } from "./audit-wire.js";
import type { UserCall } from "./change-set.js";
import type { ApiTokenRow } from "./db/entities.js";
import { instantOf } from "./domain/audit-query.js";
import type { Invites, InviteView } from "./invites.js";
import type { Members, MemberView } from "./members.js";
import type { Organizations, OrganizationView } from "./organizations.js";
import type { UsageStats } from "./usage-stats.js";
import {
  accessFromProto,
  accessToProto,
  inviteStatusToProto,
  limitsFromProto,
  limitsToProto,
  planFromProto,
  planToProto,
} from "./wire.js";

export interface OrganizationServerDeps {
  organizations: Organizations;
  invites: Invites;
  members: Members;
  apiTokens: ApiTokens;
  auditLog: AuditLog;
  usage: UsageStats;
}

function userCall(ctx: HandlerContext): UserCall {
  const principal = requireUser(ctx);
  return { principal, userId: principal.userId, requestId: requestIdOf(ctx) };
}

function toOrganization({ organization, role }: OrganizationView): Organization {
  return create(OrganizationSchema, {
    organizationId: organization.id,
    organizationSlug: organization.slug,
    name: organization.name,
    plan: planToProto(organization.plan),
    role: roleToProto(role),
    createdAt: timestampFromDate(organization.createdAt),
    updatedAt: timestampFromDate(organization.updatedAt),
  });
}

function toMember({ member, email, name }: MemberView): Member {
  return create(MemberSchema, {
    memberId: member.id,
    userId: member.userId,
    email,
    name,
    role: roleToProto(member.role),
    joinedAt: timestampFromDate(member.joinedAt),
  });
}

function toInvite({ invite, organizationName }: InviteView): Invite {
  const expired = invite.status === "pending" && invite.expiresAt <= new Date();
  return create(InviteSchema, {
    inviteId: invite.id,
    organizationId: invite.organizationId,
    organizationName,
    email: invite.email,
    role: roleToProto(invite.role),
    status: inviteStatusToProto(expired ? "expired" : invite.status),
    createdAt: timestampFromDate(invite.createdAt),
    expiresAt: timestampFromDate(invite.expiresAt),
  });
}

function toApiToken(token: ApiTokenRow): ApiToken {
  return create(ApiTokenSchema, {
    tokenId: token.id,
    name: token.name,
    access: accessToProto(token.access),
    tokenPrefix: token.tokenPrefix,
    createdAt: timestampFromDate(token.createdAt),
    lastUsedAt: token.lastUsedAt ? timestampFromDate(token.lastUsedAt) : undefined,
  });
}

/**
 * The organization handlers: proto in, rule, proto out. Public RPCs act for the signed-in user;
 * GetMembership, ResolveApiToken, GetPlan and GetMonthlyUsage answer other services, SetPlan
 * operators.
 */
export function createRoutes({
  organizations,
  invites,
  members,
  apiTokens,
  auditLog,
  usage,
}: OrganizationServerDeps) {
  return (router: ConnectRouter) =>
    router.service(OrganizationService, {
      async createOrganization(req, ctx) {
        const view = await organizations.create(userCall(ctx), req.name, req.organizationSlug);
        return { organization: toOrganization(view) };
      },
      async getOrganization(req, ctx) {
        const call = userCall(ctx);
        const { lookup } = req;
        if (lookup.case === undefined) {
          throw validationFailed([
            {
              key: "organization_id",
              message: "exactly one of organization_id and organization_slug is required",
              source: "query",
              code: "required",
            },
          ]);
        }
        const view = await organizations.get(
          call,
          lookup.case === "organizationId"
            ? { organizationId: lookup.value }
            : { slug: lookup.value },
        );
        return { organization: toOrganization(view) };
      },
      async listOrganizations(_req, ctx) {
        return { organizations: (await organizations.list(userCall(ctx))).map(toOrganization) };
      },
      async updateOrganization(req, ctx) {
        const view = await organizations.update(userCall(ctx), req.organizationId, {
          name: req.name,
          slug: req.organizationSlug,
        });
        return { organization: toOrganization(view) };
      },
      async deleteOrganization(req, ctx) {
        await organizations.delete(userCall(ctx), req.organizationId);
        return {};
      },
      async getLimits(req, ctx) {
        const { plan, limits, usage } = await organizations.limits(
          userCall(ctx),
          req.organizationId,
        );
        return {
          plan: planToProto(plan),
          limits: limitsToProto(limits),
          usage: create(PlanUsageSchema, usage),
        };
      },
      async getApiStats(req, ctx) {
        const stats = await usage.stats(
          userCall(ctx),
          req.organizationId,
          req.fromDate,
          req.toDate,
        );
        return { stats: toApiStats(stats) };
      },

      async createInvite(req, ctx) {
        const view = await invites.create(
          userCall(ctx),
          req.organizationId,
          req.email,
          roleFromProto(req.role),
        );
        return { invite: toInvite(view) };
      },
      async cancelInvite(req, ctx) {
        await invites.cancel(userCall(ctx), req.organizationId, req.inviteId);
        return {};
      },
      async listInvites(req, ctx) {
        return {
          invites: (await invites.list(userCall(ctx), req.organizationId)).map(toInvite),
        };
      },
      async listMyInvites(_req, ctx) {
        return { invites: (await invites.listMine(userCall(ctx))).map(toInvite) };
      },
      async acceptInvite(req, ctx) {
        await invites.accept(userCall(ctx), req.inviteId);
        return {};
      },
      async declineInvite(req, ctx) {
        await invites.decline(userCall(ctx), req.inviteId);
        return {};
      },

      async listMembers(req, ctx) {
        const listed =
          requirePrincipal(ctx).kind === "service"
            ? await members.listOf(req.organizationId, requestIdOf(ctx))
            : await members.list(userCall(ctx), req.organizationId);
        return { members: listed.map(toMember) };
      },
      async updateMember(req, ctx) {
        await members.update(
          userCall(ctx),
          req.organizationId,
          req.memberId,
          roleFromProto(req.role),
        );
        return {};
      },
      async removeMember(req, ctx) {
        await members.remove(userCall(ctx), req.organizationId, req.memberId);
        return {};
      },
      async sendTransferCode(req, ctx) {
        await members.sendTransferCode(userCall(ctx), req.organizationId, req.memberId);
        return {};
      },
      async confirmTransfer(req, ctx) {
        const view = await members.confirmTransfer(
          userCall(ctx),
          req.organizationId,
          req.memberId,
          req.code,
        );
        return { organization: toOrganization(view) };
      },

      async createApiToken(req, ctx) {
        const { token, secret } = await apiTokens.create(
          userCall(ctx),
          req.organizationId,
          req.name,
          accessFromProto(req.access),
        );
        return { apiToken: toApiToken(token), token: secret };
      },
      async listApiTokens(req, ctx) {
        return {
          apiTokens: (await apiTokens.list(userCall(ctx), req.organizationId)).map(toApiToken),
        };
      },
      async revokeApiToken(req, ctx) {
        await apiTokens.revoke(userCall(ctx), req.organizationId, req.tokenId);
        return {};
      },

      async listAuditEvents(req, ctx) {
        const call = userCall(ctx);
        if (req.scope.case === undefined) {
          throw validationFailed([
            {
              key: "organization_id",
              message: "exactly one of organization_id, database_id and table_id is required",
              source: "query",
              code: "required",
            },
          ]);
        }
        const { entries, total } = await auditLog.list(call, req.scope, {
          limit: req.limit,
          offset: req.offset,
          since: req.since ? instantOf(req.since) : undefined,
          until: req.until ? instantOf(req.until) : undefined,
          action: req.action,
        });
        return { events: entries.map(toAuditLogEntry), total };
      },

      async getMembership(req, ctx) {
        requireService(ctx);
        const membership = await organizations.membership(req.organizationId, req.userId);
        if (!membership) return { member: false, role: Role.UNSPECIFIED, memberId: 0n };
        return {
          member: true,
          role: roleToProto(membership.role),
          memberId: membership.memberId,
        };
      },
      async resolveApiToken(req, ctx) {
        requireService(ctx);
        const resolved = await apiTokens.resolve(req.tokenSha256);
        return {
          tokenId: resolved.tokenId,
          organizationId: resolved.organizationId,
          access: accessToProto(resolved.access),
        };
      },
      async getPlan(req, ctx) {
        requireService(ctx);
        const { plan, limits, planVersion } = await organizations.plan(req.organizationId);
        return { plan: planToProto(plan), limits: limitsToProto(limits), planVersion };
      },
      async getMonthlyUsage(req, ctx) {
        requireService(ctx);
        const monthly = await usage.monthly(req.organizationId);
        return {
          apiCallsThisMonth: monthly.apiCalls,
          transferBytesThisMonth: monthly.transferBytes,
        };
      },
      async setPlan(req, ctx) {
        const principal = requireOperator(ctx);
        const { plan, limits } = await organizations.setPlan(
          { principal, requestId: requestIdOf(ctx) },
          req.organizationId,
          planFromProto(req.plan),
          req.enterpriseLimits ? limitsFromProto(req.enterpriseLimits) : undefined,
        );
        return { plan: planToProto(plan), limits: limitsToProto(limits) };
      },
    });
}
