import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  InviteSchema as InviteMessage,
  InviteStatus,
  MemberSchema as MemberMessage,
  OrganizationSchema as OrganizationMessage,
  PlanLimitsSchema as PlanLimitsMessage,
  PlanName,
  PlanUsageSchema as PlanUsageMessage,
  Role,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { GetLimitsResponseSchema } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import {
  presentInvite,
  presentLimits,
  presentMember,
  presentOrganization,
} from "./organization-presenters.js";
import {
  OrganizationSchema,
  OrgInviteSchema,
  OrgLimitsSchema,
  OrgMemberSchema,
} from "./organization-schemas.js";

const created = new Date("2026-11-21T10:15:00.123Z");
const updated = new Date("2026-11-22T08:00:00Z");

describe("organization presenters", () => {
  it("write an organization in the Organization shape, with the caller's role", () => {
    const organization = presentOrganization(
      create(OrganizationMessage, {
        organizationId: 9007199254740991n,
        organizationSlug: "acme-corp",
        name: "Acme Corp",
        plan: PlanName.BUSINESS,
        role: Role.EDITOR,
        createdAt: timestampFromDate(created),
        updatedAt: timestampFromDate(updated),
      }),
    );
    expect(organization).toEqual({
      organization_id: 9007199254740991,
      organization_slug: "acme-corp",
      name: "Acme Corp",
      plan: "business",
      role: "editor",
      created_at: "2026-11-21T10:15:00.123Z",
      updated_at: "2026-11-22T08:00:00.000Z",
    });
    expect(OrganizationSchema.parse(organization)).toEqual(organization);
  });

  it("refuse an answer that breaks the contract rather than guess (500)", () => {
    const valid = {
      organizationId: 1n,
      organizationSlug: "acme",
      name: "Acme",
      plan: PlanName.FREE,
      role: Role.OWNER,
      createdAt: timestampFromDate(created),
      updatedAt: timestampFromDate(updated),
    };
    expect(() => presentOrganization(undefined)).toThrow(/organization is missing/);
    expect(() =>
      presentOrganization(create(OrganizationMessage, { ...valid, plan: PlanName.UNSPECIFIED })),
    ).toThrow(/plan 0/);
    expect(() =>
      presentOrganization(create(OrganizationMessage, { ...valid, role: Role.UNSPECIFIED })),
    ).toThrow(/role 0/);
    expect(() =>
      presentOrganization(create(OrganizationMessage, { ...valid, updatedAt: undefined })),
    ).toThrow(/timestamp/);
    expect(() =>
      presentOrganization(create(OrganizationMessage, { ...valid, organizationId: 2n ** 53n })),
    ).toThrow(/JSON number/);
  });

  it("write a member", () => {
    const member = presentMember(
      create(MemberMessage, {
        memberId: 5n,
        userId: 12n,
        email: "ann@example.com",
        name: "Ann",
        role: Role.OWNER,
        joinedAt: timestampFromDate(created),
      }),
    );
    expect(member).toEqual({
      member_id: 5,
      user_id: 12,
      email: "ann@example.com",
      name: "Ann",
      role: "owner",
      joined_at: "2026-11-21T10:15:00.123Z",
    });
    expect(OrgMemberSchema.parse(member)).toEqual(member);
  });

  it("write an invite with its status in lower case (CANCELED is spelled cancelled)", () => {
    const invite = (status: InviteStatus) =>
      presentInvite(
        create(InviteMessage, {
          inviteId: 3n,
          organizationId: 1n,
          organizationName: "Acme",
          email: "bob@example.com",
          role: Role.VIEWER,
          status,
          createdAt: timestampFromDate(created),
          expiresAt: timestampFromDate(updated),
        }),
      );
    expect(invite(InviteStatus.PENDING)).toEqual({
      invite_id: 3,
      organization_id: 1,
      organization_name: "Acme",
      email: "bob@example.com",
      role: "viewer",
      status: "pending",
      created_at: "2026-11-21T10:15:00.123Z",
      expires_at: "2026-11-22T08:00:00.000Z",
    });
    expect(OrgInviteSchema.parse(invite(InviteStatus.PENDING))).toBeTruthy();
    expect(invite(InviteStatus.ACCEPTED).status).toBe("accepted");
    expect(invite(InviteStatus.DECLINED).status).toBe("declined");
    expect(invite(InviteStatus.CANCELED).status).toBe("cancelled");
    expect(invite(InviteStatus.EXPIRED).status).toBe("expired");
    expect(() => invite(InviteStatus.UNSPECIFIED)).toThrow(/invite status/);
    expect(() => presentInvite(create(InviteMessage, { role: Role.OWNER }))).toThrow(/owner/);
  });

  it("write limits and usage under the documented keys", () => {
    const limits = presentLimits(
      create(GetLimitsResponseSchema, {
        plan: PlanName.FREE,
        limits: create(PlanLimitsMessage, {
          records: 1000n,
          apiCallsPerMonth: 3000n,
          fileStorageBytes: 100_000_000n,
          transferBytesPerMonth: 1_000_000_000n,
          members: 3n,
          maxFileBytes: 10_000_000n,
          changeStreams: 5n,
          webhooks: 5n,
          forms: 3n,
        }),
        usage: create(PlanUsageMessage, {
          records: 12n,
          apiCallsThisMonth: 40n,
          fileStorageBytes: 2048n,
          transferBytesThisMonth: 4096n,
          members: 2n,
        }),
      }),
    );
    expect(limits).toEqual({
      plan: "free",
      limits: {
        records: 1000,
        api_calls_per_month: 3000,
        file_storage_bytes: 100_000_000,
        transfer_bytes_per_month: 1_000_000_000,
        members: 3,
        max_file_bytes: 10_000_000,
        change_streams: 5,
        webhooks: 5,
        forms: 3,
      },
      usage: {
        records: 12,
        api_calls_this_month: 40,
        file_storage_bytes: 2048,
        transfer_bytes_this_month: 4096,
        members: 2,
      },
    });
    expect(OrgLimitsSchema.parse(limits)).toEqual(limits);
    expect(() => presentLimits(create(GetLimitsResponseSchema, { plan: PlanName.FREE }))).toThrow(
      /limits is missing/,
    );
  });
});
