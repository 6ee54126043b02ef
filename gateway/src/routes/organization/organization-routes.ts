import type { Client } from "@connectrpc/connect";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { assignableRoleValue } from "../../presentation/organization-enums.js";
import { defineRoute, type Route } from "../../routing/route.js";
import {
  presentInvite,
  presentLimits,
  presentMember,
  presentOrganization,
} from "./organization-presenters.js";
import {
  InviteCreateSchema,
  InviteIdQuery,
  InviteSchema,
  MemberIdQuery,
  MyInviteIdQuery,
  OrganizationCreateSchema,
  OrganizationGetQuery,
  OrganizationGetSchema,
  OrganizationIdQuery,
  OrganizationListSchema,
  OrganizationUpdateSchema,
  OrgLimitsSchema,
  OrgMemberListSchema,
  OrgMemberUpdateSchema,
  OwnerTransferCodeRequestSchema,
  OwnerTransferConfirmSchema,
  OwnerTransferSchema,
  PendingInviteListSchema,
} from "./organization-schemas.js";

export interface OrganizationRoutesDeps {
  organization: Client<typeof OrganizationService>;
}

const organizationTags = ["Organizations"];
const inviteTags = ["Invites"];
const memberTags = ["Members"];

/**
 * Organizations, invites, members and owner transfer, for a signed-in user.
 * The service enforces the role table; the gateway validates, forwards the caller and presents.
 * `/organization/api_stats` is served by api-stats-routes.ts. The routes that create, delete or
 * hand over something (organization create and delete, invite create, transfer send_code and
 * confirm) share `org_write_user` with the other creating routes, so that no user can flood them.
 */
export function organizationRoutes({ organization }: OrganizationRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "POST",
      path: "/organization/create",
      operationId: "organizationCreate",
      summary: "Create an organization on the free plan, owned by the caller",
      tags: organizationTags,
      auth: "session",
      rateLimits: ["org_write_user"],
      body: OrganizationCreateSchema,
      response: OrganizationGetSchema,
      errors: ["organization_limit_exceeded", "organization_slug_taken"],
      async handle({ body, call }) {
        const response = await organization.createOrganization(
          { name: body.name, organizationSlug: body.organization_slug ?? "" },
          call,
        );
        return { organization: presentOrganization(response.organization) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/organization/get",
      operationId: "organizationGet",
      summary: "One of the caller's organizations, by id or by slug",
      description: "Give exactly one of `organization_id` and `organization_slug`.",
      tags: organizationTags,
      auth: "session",
      query: OrganizationGetQuery,
      response: OrganizationGetSchema,
      errors: ["organization_not_found"],
      async handle({ query, call }) {
        const response = await organization.getOrganization({ lookup: query }, call);
        return { organization: presentOrganization(response.organization) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/organization/list",
      operationId: "organizationList",
      summary: "The organizations the caller is a member of",
      tags: organizationTags,
      auth: "session",
      response: OrganizationListSchema,
      async handle({ call }) {
        const { organizations } = await organization.listOrganizations({}, call);
        return { organizations: organizations.map((o) => presentOrganization(o)) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/update",
      operationId: "organizationUpdate",
      summary: "Rename an organization or change its slug (owner or admin)",
      tags: organizationTags,
      auth: "session",
      query: OrganizationIdQuery,
      body: OrganizationUpdateSchema,
      response: OrganizationGetSchema,
      errors: ["organization_not_found", "organization_forbidden", "organization_slug_taken"],
      async handle({ query, body, call }) {
        const response = await organization.updateOrganization(
          {
            organizationId: query.organization_id,
            name: body.name,
            organizationSlug: body.organization_slug,
          },
          call,
        );
        return { organization: presentOrganization(response.organization) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/delete",
      operationId: "organizationDelete",
      summary: "Delete an organization and everything it owns (owner only)",
      tags: organizationTags,
      auth: "session",
      rateLimits: ["org_write_user"],
      query: OrganizationIdQuery,
      errors: ["organization_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        await organization.deleteOrganization({ organizationId: query.organization_id }, call);
        return {};
      },
    }),
    defineRoute({
      method: "GET",
      path: "/organization/limits",
      operationId: "organizationLimits",
      summary: "The organization's plan, its limits and the current usage",
      tags: organizationTags,
      auth: "session",
      query: OrganizationIdQuery,
      response: OrgLimitsSchema,
      errors: ["organization_not_found"],
      async handle({ query, call }) {
        const response = await organization.getLimits(
          { organizationId: query.organization_id },
          call,
        );
        return presentLimits(response);
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/invite/create",
      operationId: "organizationInviteCreate",
      summary: "Invite an e-mail address with a role other than owner (owner or admin)",
      description:
        "Pending invites count toward the plan's `members` limit until accepted, declined, " +
        "cancelled or expired.",
      tags: inviteTags,
      auth: "session",
      rateLimits: ["org_write_user"],
      query: OrganizationIdQuery,
      body: InviteCreateSchema,
      response: InviteSchema,
      errors: [
        "organization_not_found",
        "organization_forbidden",
        "invite_already_exists",
        "already_member",
        "member_limit_exceeded",
      ],
      async handle({ query, body, call }) {
        const response = await organization.createInvite(
          {
            organizationId: query.organization_id,
            email: body.email,
            role: assignableRoleValue(body.role),
          },
          call,
        );
        return { invite: presentInvite(response.invite) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/invite/cancel",
      operationId: "organizationInviteCancel",
      summary: "Cancel a pending invite (owner or admin)",
      tags: inviteTags,
      auth: "session",
      query: InviteIdQuery,
      errors: ["organization_not_found", "organization_forbidden", "invite_not_found"],
      async handle({ query, call }) {
        await organization.cancelInvite(
          { organizationId: query.organization_id, inviteId: query.invite_id },
          call,
        );
        return {};
      },
    }),
    defineRoute({
      method: "GET",
      path: "/organization/invite/list",
      operationId: "organizationInviteList",
      summary: "The organization's pending invites",
      tags: inviteTags,
      auth: "session",
      query: OrganizationIdQuery,
      response: PendingInviteListSchema,
      errors: ["organization_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        const { invites } = await organization.listInvites(
          { organizationId: query.organization_id },
          call,
        );
        return { invites: invites.map((invite) => presentInvite(invite)) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/organization/my_invite/list",
      operationId: "organizationMyInviteList",
      summary: "Pending invites addressed to the caller's verified e-mail",
      tags: inviteTags,
      auth: "session",
      response: PendingInviteListSchema,
      async handle({ call }) {
        const { invites } = await organization.listMyInvites({}, call);
        return { invites: invites.map((invite) => presentInvite(invite)) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/my_invite/accept",
      operationId: "organizationMyInviteAccept",
      summary: "Accept an invite and become a member",
      description: "An invite to another e-mail, or one that expired, is `invite_not_found`.",
      tags: inviteTags,
      auth: "session",
      query: MyInviteIdQuery,
      errors: ["invite_not_found", "already_member", "member_limit_exceeded"],
      async handle({ query, call }) {
        await organization.acceptInvite({ inviteId: query.invite_id }, call);
        return {};
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/my_invite/decline",
      operationId: "organizationMyInviteDecline",
      summary: "Decline an invite",
      tags: inviteTags,
      auth: "session",
      query: MyInviteIdQuery,
      errors: ["invite_not_found"],
      async handle({ query, call }) {
        await organization.declineInvite({ inviteId: query.invite_id }, call);
        return {};
      },
    }),
    defineRoute({
      method: "GET",
      path: "/organization/member/list",
      operationId: "organizationMemberList",
      summary: "The organization's members",
      tags: memberTags,
      auth: "session",
      query: OrganizationIdQuery,
      response: OrgMemberListSchema,
      errors: ["organization_not_found"],
      async handle({ query, call }) {
        const { members } = await organization.listMembers(
          { organizationId: query.organization_id },
          call,
        );
        return { members: members.map((member) => presentMember(member)) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/member/update",
      operationId: "organizationMemberUpdate",
      summary: "Change a member's role (owner or admin; only the owner touches admins)",
      description: "Giving a member a role below admin revokes the API tokens that member created.",
      tags: memberTags,
      auth: "session",
      query: MemberIdQuery,
      body: OrgMemberUpdateSchema,
      errors: ["organization_not_found", "organization_forbidden", "member_not_found"],
      async handle({ query, body, call }) {
        await organization.updateMember(
          {
            organizationId: query.organization_id,
            memberId: query.member_id,
            role: assignableRoleValue(body.role),
          },
          call,
        );
        return {};
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/member/remove",
      operationId: "organizationMemberRemove",
      summary: "Remove a member, or leave (the owner can do neither)",
      description:
        "The removed user's access ends at once, and the API tokens they created are revoked.",
      tags: memberTags,
      auth: "session",
      query: MemberIdQuery,
      errors: ["organization_not_found", "organization_forbidden", "member_not_found"],
      async handle({ query, call }) {
        await organization.removeMember(
          { organizationId: query.organization_id, memberId: query.member_id },
          call,
        );
        return {};
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/transfer/send_code",
      operationId: "organizationTransferSendCode",
      summary: "Mail the owner a code that confirms handing ownership to a member",
      tags: memberTags,
      auth: "session",
      rateLimits: ["org_write_user"],
      query: OrganizationIdQuery,
      body: OwnerTransferCodeRequestSchema,
      errors: [
        "organization_not_found",
        "organization_forbidden",
        "member_not_found",
        "cannot_transfer_to_self",
      ],
      async handle({ query, body, call }) {
        await organization.sendTransferCode(
          { organizationId: query.organization_id, memberId: body.member_id },
          call,
        );
        return {};
      },
    }),
    defineRoute({
      method: "POST",
      path: "/organization/transfer/confirm",
      operationId: "organizationTransferConfirm",
      summary: "Make the member the owner; the old owner becomes an admin",
      description:
        "A wrong, killed (5 wrong tries) or missing code is `invalid_verification_code`; an " +
        "expired one `transfer_verification_code_expired`. A member who already owns 5 " +
        "organizations cannot become the owner (`organization_limit_exceeded`).",
      tags: memberTags,
      auth: "session",
      rateLimits: ["org_write_user"],
      query: OrganizationIdQuery,
      body: OwnerTransferConfirmSchema,
      response: OwnerTransferSchema,
      errors: [
        "organization_not_found",
        "organization_forbidden",
        "member_not_found",
        "cannot_transfer_to_self",
        "invalid_verification_code",
        "transfer_verification_code_expired",
        "organization_limit_exceeded",
      ],
      async handle({ query, body, call }) {
        const response = await organization.confirmTransfer(
          { organizationId: query.organization_id, memberId: body.member_id, code: body.code },
          call,
        );
        return { organization: presentOrganization(response.organization) };
      },
    }),
  ];
}
