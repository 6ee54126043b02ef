import type { Role } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { type GrantableRole, mayGrant, mayManageMember } from "./roles.js";

const ROLES: Role[] = ["owner", "admin", "editor", "viewer"];

// Invites and role changes are for owners and admins; giving or changing the
// admin role is the owner's; nobody changes the owner.
describe("member rules", () => {
  it("lets owners grant every role, admins editor and viewer, nobody else anything", () => {
    const grants = (actor: Role) =>
      (["admin", "editor", "viewer"] as GrantableRole[]).filter((role) => mayGrant(actor, role));
    expect(grants("owner")).toEqual(["admin", "editor", "viewer"]);
    expect(grants("admin")).toEqual(["editor", "viewer"]);
    expect(grants("editor")).toEqual([]);
    expect(grants("viewer")).toEqual([]);
  });

  it("never lets anybody touch the owner, and only the owner touch an admin", () => {
    const manages = (actor: Role) => ROLES.filter((target) => mayManageMember(actor, target));
    expect(manages("owner")).toEqual(["admin", "editor", "viewer"]);
    expect(manages("admin")).toEqual(["editor", "viewer"]);
    expect(manages("editor")).toEqual([]);
    expect(manages("viewer")).toEqual([]);
  });
});
