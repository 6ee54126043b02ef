import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import { DatabaseDeletedSchema } from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { Actor_Type, EventMetaSchema } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { OrganizationDeletedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { Role } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  eventOf,
  eventsOf,
  failureOf,
  type Harness,
  reasonOf,
  startHarness,
  stateOf,
  type Team,
  team,
} from "./harness.js";

let h: Harness;
let t: Team;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

async function databaseWithTables(organizationId: bigint, owner: Team["owner"], tables: number) {
  const call = await as(owner);
  const { database } = await h.catalog.createDatabase(
    { organizationId, name: "Saga", description: "" },
    call,
  );
  const tableIds: bigint[] = [];
  for (let i = 0; i < tables; i++) {
    const { table } = await h.catalog.createTable(
      {
        databaseId: database!.databaseId,
        name: `T${i}`,
        description: "",
        fields: [{ name: "Name", type: FieldType.TEXT, required: false, description: "" }],
      },
      call,
    );
    tableIds.push(table!.tableId);
  }
  return { databaseId: database!.databaseId, tableIds };
}

/** Publishes org.organization.deleted as the organization service would (a replay, a test). */
async function announceDeletion(organizationId: bigint) {
  const eventId = crypto.randomUUID();
  const event = create(OrganizationDeletedSchema, {
    meta: create(EventMetaSchema, { eventId, occurredAt: timestampNow(), requestId: "replay" }),
    organizationId,
  });
  await h.bus.publish(
    "org.organization.deleted",
    toBinary(OrganizationDeletedSchema, event),
    eventId,
  );
}

describe("organization deletion", () => {
  it("deletes the organization's databases when it is deleted, announcing each", async () => {
    const owner = await h.user("Leaving owner");
    const { organization } = await h.org.createOrganization(
      { name: "Short-lived", organizationSlug: "" },
      await as(owner),
    );
    const organizationId = organization!.organizationId;
    const one = await databaseWithTables(organizationId, owner, 2);
    const two = await databaseWithTables(organizationId, owner, 0);
    const kept = await databaseWithTables(t.organizationId, t.owner, 1);

    await h.org.deleteOrganization({ organizationId }, await as(owner));

    const first = await eventOf(
      h,
      "catalog.database.deleted",
      DatabaseDeletedSchema,
      (e) => e.databaseId === one.databaseId,
    );
    expect(first).toMatchObject({ organizationId, tableIds: one.tableIds });
    expect(first.meta?.actor?.type).toBe(Actor_Type.SYSTEM);
    const second = await eventOf(
      h,
      "catalog.database.deleted",
      DatabaseDeletedSchema,
      (e) => e.databaseId === two.databaseId,
    );
    expect(second.tableIds).toEqual([]);
    expect(await stateOf(h.db, organizationId)).toMatchObject({
      databases: [],
      tables: [],
      fields: [],
    });
    // Only that organization's.
    expect(
      (await h.catalog.getDatabase({ databaseId: kept.databaseId }, await as(t.viewer))).database,
    ).toBeDefined();
    // No audit entries for an organization whose audit log goes with it.
    const { rows } = await h.db.query(
      "select payload from catalog.outbox where subject = 'audit.database.deleted'",
    );
    const audited = rows.map((row) => fromBinary(AuditEventSchema, row.payload));
    expect(audited.filter((e) => e.organizationId === organizationId)).toEqual([]);
  });

  it("is idempotent: a replayed event deletes and announces nothing more", async () => {
    const owner = await h.user("Replay owner");
    const { organization } = await h.org.createOrganization(
      { name: "Replayed", organizationSlug: "" },
      await as(owner),
    );
    const organizationId = organization!.organizationId;
    const { databaseId } = await databaseWithTables(organizationId, owner, 1);
    await h.org.deleteOrganization({ organizationId }, await as(owner));
    await eventOf(
      h,
      "catalog.database.deleted",
      DatabaseDeletedSchema,
      (e) => e.databaseId === databaseId,
    );
    const outbox = ((await stateOf(h.db, organizationId)) as { outbox: number }).outbox;
    await announceDeletion(organizationId);
    await announceDeletion(organizationId);
    await expect
      .poll(
        () =>
          eventsOf(h.events, "org.organization.deleted", OrganizationDeletedSchema).filter(
            (e) => e.organizationId === organizationId,
          ).length,
      )
      .toBe(3);
    // The consumer has seen the replays once a later event of the same stream is handled.
    const marker = await h.user("Marker");
    const { organization: other } = await h.org.createOrganization(
      { name: "Marker", organizationSlug: "" },
      await as(marker),
    );
    await h.org.deleteOrganization({ organizationId: other!.organizationId }, await as(marker));
    await expect
      .poll(async () => {
        const { rows } = await h.db.query(
          "select 1 from catalog.deleted_organizations where organization_id = $1",
          [other!.organizationId.toString()],
        );
        return rows.length;
      })
      .toBe(1);
    expect(((await stateOf(h.db, organizationId)) as { outbox: number }).outbox).toBe(outbox);
    expect(
      eventsOf(h.events, "catalog.database.deleted", DatabaseDeletedSchema).filter(
        (e) => e.databaseId === databaseId,
      ),
    ).toHaveLength(1);
  });

  it("refuses databases in an organization whose deletion it has carried out", async () => {
    // The organization still exists for the organization service (its deletion event is
    // replayed here alone), so only catalog's own mark can refuse the create.
    const owner = await h.user("Raced owner");
    const { organization } = await h.org.createOrganization(
      { name: "Raced", organizationSlug: "" },
      await as(owner),
    );
    const organizationId = organization!.organizationId;
    const { databaseId } = await databaseWithTables(organizationId, owner, 1);
    await announceDeletion(organizationId);
    await eventOf(
      h,
      "catalog.database.deleted",
      DatabaseDeletedSchema,
      (e) => e.databaseId === databaseId,
    );
    expect(
      await failureOf(
        h.catalog.createDatabase(
          { organizationId, name: "Too late", description: "" },
          await as(owner),
        ),
      ),
    ).toMatchObject({ code: 5, reason: "organization_not_found" });
    expect(await stateOf(h.db, organizationId)).toMatchObject({ databases: [] });
  });
});

describe("membership changes", () => {
  it("takes effect at once: a removed member loses access, a promoted viewer may write", async () => {
    const [owner, member] = await Promise.all([h.user("Owner"), h.user("Member")]);
    const { organization } = await h.org.createOrganization(
      { name: "Changing", organizationSlug: "" },
      await as(owner),
    );
    const organizationId = organization!.organizationId;
    const { invite } = await h.org.createInvite(
      { organizationId, email: member.email, role: Role.VIEWER },
      await as(owner),
    );
    await h.org.acceptInvite({ inviteId: invite!.inviteId }, await as(member));
    const { databaseId } = await databaseWithTables(organizationId, owner, 0);
    const memberCall = async () => as(member);

    // Cached as viewer first.
    expect(
      await reasonOf(h.catalog.updateDatabase({ databaseId, name: "X" }, await memberCall())),
    ).toBe("organization_forbidden");
    const { members } = await h.org.listMembers({ organizationId }, await as(owner));
    const memberId = members.find((m) => m.userId === member.id)!.memberId;
    await h.org.updateMember({ organizationId, memberId, role: Role.EDITOR }, await as(owner));
    const { database } = await h.catalog.updateDatabase(
      { databaseId, name: "Renamed by the member" },
      await memberCall(),
    );
    expect(database!.name).toBe("Renamed by the member");

    await h.org.removeMember({ organizationId, memberId }, await as(owner));
    expect(await reasonOf(h.catalog.getDatabase({ databaseId }, await memberCall()))).toBe(
      "database_not_found",
    );
  });
});
