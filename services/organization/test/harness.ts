import type { Client } from "@connectrpc/connect";
import type { Principal } from "@rowbase/kit";
import {
  as,
  eventsOf,
  failureOf,
  reasonOf,
  type TestStack,
  validationOf,
} from "@rowbase/kit/testing";
import { PlanName, Role } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { startTestServices, type TestService, type TestUser } from "@rowbase/standalone/testing";
import type pg from "pg";
import { expect } from "vitest";
import type { OrganizationConfig, RunningOrganization } from "../src/index.js";

export type { TestUser };
export { as, eventsOf, failureOf, reasonOf, validationOf };

export interface Harness extends Pick<TestStack, "mail" | "db" | "cache" | "bus" | "events"> {
  org: Client<typeof OrganizationService>;
  config: OrganizationConfig;
  /** The running service (its audit store's retention job, for one). */
  service: RunningOrganization;
  /** A registered user with a verified e-mail. */
  user(name?: string): Promise<TestUser>;
  /** A registered user who never verified the e-mail. */
  unverifiedUser(): Promise<TestUser>;
  /**
   * Starts another organization process on the same database, cache and bus, with `env` over
   * its environment: a replica, or one configured otherwise.
   */
  replica(env?: Record<string, string>): Promise<TestService<"organization">>;
  stop(): Promise<void>;
}

export const SERVICE: Principal = { kind: "service", service: "gateway" };
export const OPERATOR: Principal = { kind: "operator", name: "test-operator" };

/**
 * Everything stored for an organization plus the outbox size: a refused write must leave it as
 * it was.
 */
export async function stateOf(db: pg.Pool, organizationId: bigint): Promise<unknown> {
  const id = organizationId.toString();
  const rows = async (sql: string) => (await db.query(sql, [id])).rows;
  return {
    organization: await rows("select * from organization.organizations where id = $1"),
    members: await rows(
      "select * from organization.members where organization_id = $1 order by id",
    ),
    invites: await rows(
      "select * from organization.invites where organization_id = $1 order by id",
    ),
    tokens: await rows(
      "select * from organization.api_tokens where organization_id = $1 order by id",
    ),
    transfer: await rows("select * from organization.transfer_codes where organization_id = $1"),
    outbox: (await db.query("select count(*)::int as n from organization.outbox")).rows[0].n,
  };
}

/**
 * The real identity service and the organization service against one fresh database, Redis
 * under a unique prefix, NATS under a unique namespace and a mail catcher.
 */
export async function startHarness(
  env: Record<string, string> = {},
  options: { natsUrl?: string } = {},
): Promise<Harness> {
  const services = await startTestServices({
    through: "organization",
    env: { organization: env },
    record: ["ORG", "AUDIT"],
    ...options,
  });
  const { stack } = services;
  // Every migration, by name: the list is append-only (a database keeps the names it ran), so
  // a new migration is added here, at the end, and nothing before it moves.
  expect(services.migrated.organization).toEqual([
    "InitialSchema",
    "AuditLogAndUsage",
    "PlanVersion",
    "AuditCounts",
    "AuditVia",
    "FormActor",
    "AuditGroups",
    "Lz4Compression",
    "AuditGroupLabels",
    "AuditGroupChangesJson",
  ]);
  const { service, config } = services.service("organization");
  return {
    org: services.client("organization"),
    mail: stack.mail,
    db: stack.db,
    cache: stack.cache,
    config,
    service,
    bus: stack.bus,
    events: stack.events,
    user: (name = "Ada") => services.user(name),
    unverifiedUser: () => services.user("Unverified", { verified: false }),
    replica: (env) => services.replica("organization", env),
    stop: () => services.stop(),
  };
}

export async function newOrganization(h: Harness, owner: TestUser, name = "Acme Corp", slug = "") {
  const { organization } = await h.org.createOrganization(
    { name, organizationSlug: slug },
    await as(owner),
  );
  return organization!;
}

/** An organization on the plus plan with a member of each role, and a user outside it. */
export async function team(h: Harness) {
  const [owner, admin, editor, viewer, outsider] = await Promise.all([
    h.user("Owner"),
    h.user("Admin"),
    h.user("Editor"),
    h.user("Viewer"),
    h.user("Outsider"),
  ]);
  const organization = await newOrganization(h, owner, "Team");
  const id = organization.organizationId;
  await h.org.setPlan({ organizationId: id, plan: PlanName.PLUS }, await as(OPERATOR));
  const memberIds = new Map<TestUser, bigint>();
  for (const [user, role] of [
    [admin, Role.ADMIN],
    [editor, Role.EDITOR],
    [viewer, Role.VIEWER],
  ] as const) {
    const { invite } = await h.org.createInvite(
      { organizationId: id, email: user.email, role },
      await as(owner),
    );
    await h.org.acceptInvite({ inviteId: invite!.inviteId }, await as(user));
  }
  const { members } = await h.org.listMembers({ organizationId: id }, await as(owner));
  for (const user of [owner, admin, editor, viewer]) {
    memberIds.set(user, members.find((m) => m.userId === user.id)!.memberId);
  }
  /** The member id of a user of the team. */
  const memberOf = (user: TestUser) => memberIds.get(user)!;
  return { organization, id, owner, admin, editor, viewer, outsider, memberOf };
}
