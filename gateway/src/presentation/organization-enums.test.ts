import {
  InviteStatus,
  PlanName,
  Role,
  TokenAccess,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { describe, expect, it } from "vitest";
import {
  ASSIGNABLE_ROLES,
  assignableRoleName,
  assignableRoleValue,
  inviteStatusName,
  planName,
  roleName,
  TOKEN_ACCESS,
  tokenAccessName,
  tokenAccessValue,
} from "./organization-enums.js";

describe("the organization contract's enums on the wire", () => {
  it("name every role, and turn the assignable ones back into the proto's", () => {
    expect([Role.OWNER, Role.ADMIN, Role.EDITOR, Role.VIEWER].map(roleName)).toEqual([
      "owner",
      "admin",
      "editor",
      "viewer",
    ]);
    for (const name of ASSIGNABLE_ROLES) {
      expect(roleName(assignableRoleValue(name))).toBe(name);
      expect(assignableRoleName(assignableRoleValue(name))).toBe(name);
    }
    expect(() => assignableRoleName(Role.OWNER)).toThrow();
  });

  it("name invite statuses, plans and token access as the REST API spells them", () => {
    expect(
      [
        InviteStatus.PENDING,
        InviteStatus.ACCEPTED,
        InviteStatus.DECLINED,
        InviteStatus.CANCELED,
        InviteStatus.EXPIRED,
      ].map(inviteStatusName),
    ).toEqual(["pending", "accepted", "declined", "cancelled", "expired"]);
    expect(
      [PlanName.FREE, PlanName.PLUS, PlanName.BUSINESS, PlanName.ENTERPRISE].map(planName),
    ).toEqual(["free", "plus", "business", "enterprise"]);
    expect([TokenAccess.READ, TokenAccess.READ_WRITE].map(tokenAccessName)).toEqual([
      "read",
      "read_write",
    ]);
    for (const name of TOKEN_ACCESS) expect(tokenAccessName(tokenAccessValue(name))).toBe(name);
  });

  it("refuse the unspecified zero values and values this gateway does not know", () => {
    expect(() => roleName(Role.UNSPECIFIED)).toThrow(/role 0/);
    expect(() => inviteStatusName(InviteStatus.UNSPECIFIED)).toThrow(/invite status 0/);
    expect(() => planName(PlanName.UNSPECIFIED)).toThrow(/plan 0/);
    expect(() => tokenAccessName(TokenAccess.UNSPECIFIED)).toThrow(/token access 0/);
    expect(() => planName(9 as PlanName)).toThrow(/plan 9/);
  });
});
