import type { Client } from "@connectrpc/connect";
import { Role as RoleEnum } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import { organizationMembershipLookup, roleFromProto, roleToProto } from "./membership-lookup.js";
import { PRINCIPAL_HEADER, verifyPrincipal } from "./principal.js";

const SECRET = "test-secret-test-secret-test-secret";

describe("roles and the Role enum", () => {
  it("map both ways, and nothing for UNSPECIFIED or an unknown number", () => {
    for (const role of ["owner", "admin", "editor", "viewer"] as const) {
      expect(roleFromProto(roleToProto(role))).toBe(role);
    }
    expect(roleToProto("editor")).toBe(RoleEnum.EDITOR);
    expect(roleFromProto(RoleEnum.UNSPECIFIED)).toBeUndefined();
    expect(roleFromProto(99 as RoleEnum)).toBeUndefined();
  });
});

describe("organizationMembershipLookup", () => {
  function organizations(answer: { member: boolean; role: RoleEnum }) {
    const calls: { request: unknown; principal: unknown }[] = [];
    const client = {
      async getMembership(request: unknown, options: { headers: Record<string, string> }) {
        const token = options.headers[PRINCIPAL_HEADER] ?? "";
        calls.push({ request, principal: await verifyPrincipal(SECRET, token) });
        return answer;
      },
    } as unknown as Client<typeof OrganizationService>;
    return { client, calls };
  }

  it("asks as the named service and answers the member's role", async () => {
    const { client, calls } = organizations({ member: true, role: RoleEnum.ADMIN });
    const lookup = organizationMembershipLookup(client, SECRET, "files");
    expect(await lookup(7n, 9n)).toBe("admin");
    expect(calls).toEqual([
      {
        request: { organizationId: 7n, userId: 9n },
        principal: { kind: "service", service: "files" },
      },
    ]);
  });

  it("answers undefined for a non-member", async () => {
    const { client } = organizations({ member: false, role: RoleEnum.UNSPECIFIED });
    expect(await organizationMembershipLookup(client, SECRET, "catalog")(7n, 9n)).toBeUndefined();
  });
});
