import { auditChangesOf, errorInfoOf } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  DatabaseCreatedSchema,
  DatabaseDeletedSchema,
  DatabaseUpdatedSchema,
  TableDeletedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { Actor_Type } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  eventOf,
  eventsOf,
  failureOf,
  type Harness,
  reasonOf,
  SERVICE,
  startHarness,
  stateOf,
  type Team,
  team,
  validationOf,
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

async function newDatabase(name = "Projects", description = "") {
  const { database } = await h.catalog.createDatabase(
    { organizationId: t.organizationId, name, description },
    await as(t.editor),
  );
  return database!;
}

const changesOf = (audit: { changesJson: string }) =>
  Object.fromEntries(
    auditChangesOf(audit.changesJson).map((c) => [c.key, { old: c.old, new: c.new }]),
  );

describe("CreateDatabase", () => {
  it("creates a database, announces it and audits it", async () => {
    const { database } = await h.catalog.createDatabase(
      { organizationId: t.organizationId, name: "  CRM  ", description: "Leads\nand deals" },
      await as(t.editor),
    );
    expect(database).toMatchObject({
      organizationId: t.organizationId,
      name: "CRM",
      description: "Leads\nand deals",
    });
    expect(database!.databaseId).toBeGreaterThan(0n);
    expect(database!.createdAt).toBeDefined();
    expect(database!.updatedAt).toBeDefined();

    const created = await eventOf(
      h,
      "catalog.database.created",
      DatabaseCreatedSchema,
      (e) => e.databaseId === database!.databaseId,
    );
    expect(created).toMatchObject({ organizationId: t.organizationId, name: "CRM" });
    expect(created.meta?.actor).toMatchObject({ type: Actor_Type.USER, id: t.editor.id });
    expect(created.meta?.eventId).toMatch(/^[0-9a-f-]{36}$/);

    const audit = await eventOf(
      h,
      "audit.database.created",
      AuditEventSchema,
      (e) => e.target?.id === database!.databaseId,
    );
    expect(audit).toMatchObject({
      organizationId: t.organizationId,
      databaseId: database!.databaseId,
      tableId: 0n,
      action: "database.created",
      target: { type: "database", id: database!.databaseId },
    });
    expect(changesOf(audit)).toEqual({
      name: { old: undefined, new: "CRM" },
      description: { old: undefined, new: "Leads\nand deals" },
    });
  });

  it("lets every writing role create and allows repeated names", async () => {
    const names = new Set<bigint>();
    for (const user of [t.owner, t.admin, t.editor]) {
      const { database } = await h.catalog.createDatabase(
        { organizationId: t.organizationId, name: "Same name", description: "" },
        await as(user),
      );
      names.add(database!.databaseId);
    }
    expect(names.size).toBe(3);
  });

  it("refuses a viewer (403) and an outsider (404), and writes nothing", async () => {
    const before = await stateOf(h.db, t.organizationId);
    const viewer = await failureOf(
      h.catalog.createDatabase(
        { organizationId: t.organizationId, name: "Nope", description: "" },
        await as(t.viewer),
      ),
    );
    expect(viewer).toMatchObject({ code: 7, reason: "organization_forbidden" });
    const outsider = await failureOf(
      h.catalog.createDatabase(
        { organizationId: t.organizationId, name: "Nope", description: "" },
        await as(t.outsider),
      ),
    );
    expect(outsider).toMatchObject({ code: 5, reason: "organization_not_found" });
    expect(
      await reasonOf(
        h.catalog.createDatabase(
          { organizationId: 987654321n, name: "Nope", description: "" },
          await as(t.owner),
        ),
      ),
    ).toBe("organization_not_found");
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("refuses a call without a principal and a service principal", async () => {
    expect(
      await failureOf(
        h.catalog.createDatabase({ organizationId: t.organizationId, name: "X", description: "" }),
      ),
    ).toMatchObject({ code: 16, reason: "unauthorized" });
    expect(
      await reasonOf(
        h.catalog.createDatabase(
          { organizationId: t.organizationId, name: "X", description: "" },
          await as(SERVICE),
        ),
      ),
    ).toBe("organization_not_found");
  });

  it("refuses API tokens every write, as the gateway does on management routes, writing nothing", async () => {
    // A read_write token is an editor to kit's Authorizer (records and files need that); the
    // API lets no token change schemas: tokens write records and files only.
    const database = await newDatabase("Not by tokens");
    const { table, fields } = await h.catalog.createTable(
      {
        databaseId: database.databaseId,
        name: "Kept",
        description: "",
        fields: [{ name: "Name", type: FieldType.TEXT, required: false, description: "" }],
      },
      await as(t.editor),
    );
    const tableId = table!.tableId;
    const fieldId = fields[0]!.fieldId;
    const { databaseId } = database;
    const before = await stateOf(h.db, t.organizationId);
    for (const access of ["read_write", "read"] as const) {
      const token = await as({
        kind: "api_token",
        tokenId: 1n,
        organizationId: t.organizationId,
        access,
      });
      const field = { name: "By token", type: FieldType.TEXT, required: false, description: "" };
      const calls = [
        () =>
          h.catalog.createDatabase(
            { organizationId: t.organizationId, name: "By token", description: "" },
            token,
          ),
        () => h.catalog.updateDatabase({ databaseId, name: "By token" }, token),
        () => h.catalog.deleteDatabase({ databaseId }, token),
        () =>
          h.catalog.createTable(
            { databaseId, name: "By token", description: "", fields: [field] },
            token,
          ),
        () => h.catalog.updateTable({ tableId, name: "By token" }, token),
        () => h.catalog.deleteTable({ tableId }, token),
        () => h.catalog.createField({ tableId, field }, token),
        () => h.catalog.updateField({ fieldId, name: "By token", type: FieldType.NUMBER }, token),
        () => h.catalog.deleteField({ fieldId }, token),
      ];
      for (const call of calls) {
        expect(await failureOf(call())).toMatchObject({ code: 16, reason: "unauthorized" });
      }
    }
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("lets an API token read its own organization's schema, and no other's", async () => {
    const database = await newDatabase("Read by tokens");
    const { table } = await h.catalog.createTable(
      {
        databaseId: database.databaseId,
        name: "Readable",
        description: "",
        fields: [{ name: "Name", type: FieldType.TEXT, required: false, description: "" }],
      },
      await as(t.editor),
    );
    const tableId = table!.tableId;
    const { databaseId } = database;
    for (const access of ["read_write", "read"] as const) {
      const own = await as({
        kind: "api_token",
        tokenId: 1n,
        organizationId: t.organizationId,
        access,
      });
      expect((await h.catalog.getDatabase({ databaseId }, own)).database?.name).toBe(
        "Read by tokens",
      );
      const { databases } = await h.catalog.listDatabases(
        { organizationId: t.organizationId },
        own,
      );
      expect(databases.map((d) => d.databaseId)).toContain(databaseId);
      expect((await h.catalog.getTable({ tableId }, own)).fields.map((f) => f.name)).toEqual([
        "Name",
      ]);
      expect(
        (await h.catalog.listTables({ databaseId }, own)).tables.map((x) => x.tableId),
      ).toEqual([tableId]);
      expect((await h.catalog.listFields({ tableId }, own)).fields).toHaveLength(1);

      const foreign = await as({
        kind: "api_token",
        tokenId: 2n,
        organizationId: t.organizationId + 1_000_000n,
        access,
      });
      expect(await reasonOf(h.catalog.getDatabase({ databaseId }, foreign))).toBe(
        "database_not_found",
      );
      expect(
        await reasonOf(h.catalog.listDatabases({ organizationId: t.organizationId }, foreign)),
      ).toBe("organization_not_found");
      expect(await reasonOf(h.catalog.getTable({ tableId }, foreign))).toBe("table_not_found");
      expect(await reasonOf(h.catalog.listTables({ databaseId }, foreign))).toBe(
        "database_not_found",
      );
      expect(await reasonOf(h.catalog.listFields({ tableId }, foreign))).toBe("table_not_found");
    }
  });

  it.each([
    ["", "must be 1-100 characters"],
    ["    ", "must be 1-100 characters"],
    ["x".repeat(101), "must be 1-100 characters"],
    ["tab\there", "must not contain control characters"],
    ["nul\u0000", "must not contain control characters"],
    ["c1\u0085", "must not contain control characters"],
    ["gnp.exe\u202e", "must not contain control characters"],
    ["\u200b\u2060", "must contain a visible character"],
  ])("refuses the name %j", async (name, message) => {
    expect(
      await validationOf(
        h.catalog.createDatabase(
          { organizationId: t.organizationId, name, description: "" },
          await as(t.editor),
        ),
      ),
    ).toEqual([{ key: "name", message, source: "body", code: expect.any(String) }]);
  });

  it("takes a name of 100 characters after trimming and refuses long descriptions", async () => {
    const database = await newDatabase(`  ${"n".repeat(100)}  `);
    expect(database.name).toBe("n".repeat(100));
    expect(
      await validationOf(
        h.catalog.createDatabase(
          { organizationId: t.organizationId, name: "ok", description: "d".repeat(1001) },
          await as(t.editor),
        ),
      ),
    ).toEqual([
      {
        key: "description",
        message: "must be at most 1000 characters",
        source: "body",
        code: "too_long",
      },
    ]);
  });

  it("are at most 1000 per organization, even when creates race for the last places", async () => {
    const crowded = await team(h);
    const create = async (name: string) =>
      h.catalog.createDatabase(
        { organizationId: crowded.organizationId, name, description: "" },
        await as(crowded.editor),
      );
    // 997 made directly (the API would take a while), then three places left for eight.
    await h.db.query(
      `insert into catalog.databases (organization_id, name)
       select $1, 'D' || n from generate_series(1, 997) as n`,
      [crowded.organizationId.toString()],
    );
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        create(`Late ${i}`).then(
          () => "created",
          (error: unknown) => errorInfoOf(error)?.reason,
        ),
      ),
    );
    expect(answers.filter((a) => a === "created")).toHaveLength(3);
    expect(answers.filter((a) => a === "database_limit_exceeded")).toHaveLength(5);
    const count = async () =>
      (
        await h.db.query(
          "select count(*)::int as n from catalog.databases where organization_id = $1",
          [crowded.organizationId.toString()],
        )
      ).rows[0].n;
    expect(await count()).toBe(1000);
    expect(await failureOf(create("One more"))).toMatchObject({
      code: 8,
      reason: "database_limit_exceeded",
    });
    expect(await count()).toBe(1000);

    // A deleted database's place goes to exactly one of the creates racing for it.
    const { databases } = await h.catalog.listDatabases(
      { organizationId: crowded.organizationId },
      await as(crowded.owner),
    );
    await h.catalog.deleteDatabase(
      { databaseId: databases[0]!.databaseId },
      await as(crowded.owner),
    );
    const again = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        create(`Again ${i}`).then(
          () => "created",
          (error: unknown) => errorInfoOf(error)?.reason,
        ),
      ),
    );
    expect(again.filter((a) => a === "created")).toHaveLength(1);
    expect(again.filter((a) => a === "database_limit_exceeded")).toHaveLength(7);
    expect(await count()).toBe(1000);
  });
});

describe("GetDatabase and ListDatabases", () => {
  it("answers every member, and services without a role", async () => {
    const database = await newDatabase("Readable");
    for (const user of [t.owner, t.admin, t.editor, t.viewer]) {
      const { database: got } = await h.catalog.getDatabase(
        { databaseId: database.databaseId },
        await as(user),
      );
      expect(got).toEqual(database);
    }
    const { database: got } = await h.catalog.getDatabase(
      { databaseId: database.databaseId },
      await as(SERVICE),
    );
    expect(got).toEqual(database);
  });

  it("answers 404 to outsiders and for missing ids", async () => {
    const database = await newDatabase("Hidden");
    expect(
      await failureOf(
        h.catalog.getDatabase({ databaseId: database.databaseId }, await as(t.outsider)),
      ),
    ).toMatchObject({ code: 5, reason: "database_not_found" });
    for (const principal of [await as(t.owner), await as(SERVICE)]) {
      expect(await reasonOf(h.catalog.getDatabase({ databaseId: 99999999n }, principal))).toBe(
        "database_not_found",
      );
    }
  });

  it("lists the organization's databases oldest first, to members only", async () => {
    const { databases: before } = await h.catalog.listDatabases(
      { organizationId: t.organizationId },
      await as(t.viewer),
    );
    const a = await newDatabase("List A");
    const b = await newDatabase("List B");
    const { databases } = await h.catalog.listDatabases(
      { organizationId: t.organizationId },
      await as(t.viewer),
    );
    expect(databases).toHaveLength(before.length + 2);
    expect(databases.slice(-2)).toEqual([a, b]);
    const ids = databases.map((d) => d.databaseId);
    expect([...ids].sort((x, y) => (x < y ? -1 : 1))).toEqual(ids);
    expect(databases.every((d) => d.organizationId === t.organizationId)).toBe(true);

    expect(
      await reasonOf(
        h.catalog.listDatabases({ organizationId: t.organizationId }, await as(t.outsider)),
      ),
    ).toBe("organization_not_found");
    const { databases: theirs } = await h.catalog.listDatabases(
      { organizationId: t.outsiderOrganizationId },
      await as(t.outsider),
    );
    expect(theirs).toEqual([]);
  });
});

describe("UpdateDatabase", () => {
  it("changes what is given, keeps the rest, announces and audits old and new", async () => {
    const database = await newDatabase("Before", "Kept");
    const { database: updated } = await h.catalog.updateDatabase(
      { databaseId: database.databaseId, name: " After " },
      await as(t.admin),
    );
    expect(updated).toMatchObject({ name: "After", description: "Kept" });
    expect(updated!.createdAt).toEqual(database.createdAt);
    const event = await eventOf(
      h,
      "catalog.database.updated",
      DatabaseUpdatedSchema,
      (e) => e.databaseId === database.databaseId,
    );
    expect(event).toMatchObject({ organizationId: t.organizationId, name: "After" });
    const audit = await eventOf(
      h,
      "audit.database.updated",
      AuditEventSchema,
      (e) => e.target?.id === database.databaseId,
    );
    expect(changesOf(audit)).toEqual({ name: { old: "Before", new: "After" } });

    const { database: cleared } = await h.catalog.updateDatabase(
      { databaseId: database.databaseId, description: "" },
      await as(t.editor),
    );
    expect(cleared).toMatchObject({ name: "After", description: "" });
  });

  it("publishes nothing when nothing changes", async () => {
    const database = await newDatabase("Same");
    const before = await stateOf(h.db, t.organizationId);
    const { database: same } = await h.catalog.updateDatabase(
      { databaseId: database.databaseId, name: "Same" },
      await as(t.editor),
    );
    expect(same).toEqual(database);
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("refuses viewers, outsiders, missing ids and bad names without a change", async () => {
    const database = await newDatabase("Guarded");
    const before = await stateOf(h.db, t.organizationId);
    const id = database.databaseId;
    expect(
      await reasonOf(h.catalog.updateDatabase({ databaseId: id, name: "X" }, await as(t.viewer))),
    ).toBe("organization_forbidden");
    expect(
      await reasonOf(h.catalog.updateDatabase({ databaseId: id, name: "X" }, await as(t.outsider))),
    ).toBe("database_not_found");
    expect(
      await reasonOf(
        h.catalog.updateDatabase({ databaseId: 99999999n, name: "X" }, await as(t.owner)),
      ),
    ).toBe("database_not_found");
    expect(
      await validationOf(
        h.catalog.updateDatabase({ databaseId: id, name: " " }, await as(t.owner)),
      ),
    ).toEqual([
      { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
    ]);
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });
});

describe("DeleteDatabase", () => {
  it("deletes the database with its tables and fields, naming every table in the event", async () => {
    const database = await newDatabase("Doomed");
    const call = await as(t.editor);
    const { table: a } = await h.catalog.createTable(
      {
        databaseId: database.databaseId,
        name: "A",
        description: "",
        fields: [{ name: "Title", type: 1, required: false, description: "" }],
      },
      call,
    );
    const { table: b } = await h.catalog.createTable(
      { databaseId: database.databaseId, name: "B", description: "", fields: [] },
      call,
    );
    const { deletedId } = await h.catalog.deleteDatabase({ databaseId: database.databaseId }, call);
    expect(deletedId).toBe(database.databaseId);
    expect(await reasonOf(h.catalog.getDatabase({ databaseId: database.databaseId }, call))).toBe(
      "database_not_found",
    );
    expect(await reasonOf(h.catalog.getTable({ tableId: a!.tableId }, call))).toBe(
      "table_not_found",
    );
    const { rows } = await h.db.query(
      "select count(*)::int as n from catalog.fields where table_id = any($1)",
      [[a!.tableId.toString(), b!.tableId.toString()]],
    );
    expect(rows[0].n).toBe(0);

    const event = await eventOf(
      h,
      "catalog.database.deleted",
      DatabaseDeletedSchema,
      (e) => e.databaseId === database.databaseId,
    );
    expect(event.organizationId).toBe(t.organizationId);
    expect(event.tableIds).toEqual([a!.tableId, b!.tableId]);
    const audit = await eventOf(
      h,
      "audit.database.deleted",
      AuditEventSchema,
      (e) => e.target?.id === database.databaseId,
    );
    expect(auditChangesOf(audit.changesJson).map((c) => c.key)).toEqual([
      "name",
      "description",
      "table_ids",
    ]);
    expect(auditChangesOf(audit.changesJson).every((c) => c.new === undefined)).toBe(true);
    // A second delete finds nothing.
    expect(
      await reasonOf(h.catalog.deleteDatabase({ databaseId: database.databaseId }, call)),
    ).toBe("database_not_found");
    // The database event stands for its tables: no table.deleted was published for them (they
    // would have been written to the outbox before it).
    expect(
      eventsOf(h.events, "catalog.table.deleted", TableDeletedSchema).filter(
        (e) => e.tableId === a!.tableId || e.tableId === b!.tableId,
      ),
    ).toEqual([]);
  });

  it("refuses viewers and outsiders, deleting nothing", async () => {
    const database = await newDatabase("Kept");
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await reasonOf(
        h.catalog.deleteDatabase({ databaseId: database.databaseId }, await as(t.viewer)),
      ),
    ).toBe("organization_forbidden");
    expect(
      await reasonOf(
        h.catalog.deleteDatabase({ databaseId: database.databaseId }, await as(t.outsider)),
      ),
    ).toBe("database_not_found");
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });
});
