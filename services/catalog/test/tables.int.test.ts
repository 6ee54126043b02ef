import { auditChangesOf, errorInfoOf } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  FieldCreatedSchema,
  TableCreatedSchema,
  TableDeletedSchema,
  TableUpdatedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  eventOf,
  eventsOf,
  failureOf,
  type Harness,
  optionErrorsOf,
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
let databaseId: bigint;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
  const { database } = await h.catalog.createDatabase(
    { organizationId: t.organizationId, name: "Workspace", description: "" },
    await as(t.owner),
  );
  databaseId = database!.databaseId;
});

afterAll(async () => {
  await h?.stop();
});

const def = (
  name: string,
  type: FieldType,
  extra: { options?: Record<string, unknown>; required?: boolean; description?: string } = {},
) => ({
  name,
  type,
  options: extra.options as never,
  required: extra.required ?? false,
  description: extra.description ?? "",
});

async function newTable(name: string, fields: ReturnType<typeof def>[] = []) {
  return h.catalog.createTable({ databaseId, name, description: "", fields }, await as(t.editor));
}

describe("CreateTable", () => {
  it("creates a table with its initial fields in order, normalised, announced and audited", async () => {
    const { table, fields } = await h.catalog.createTable(
      {
        databaseId,
        name: " Contacts ",
        description: "People",
        fields: [
          def("Name", FieldType.TEXT, { required: true, options: { max_length: 200 } }),
          def("Age", FieldType.NUMBER),
          def("Stage", FieldType.SINGLE_SELECT, { options: { choices: [{ name: "Lead" }] } }),
          def("Created", FieldType.CREATED_AT, { description: "When" }),
        ],
      },
      await as(t.editor),
    );
    expect(table).toMatchObject({ databaseId, name: "Contacts", description: "People" });
    expect(fields.map((f) => [f.name, f.type, f.position, f.required, f.tableId])).toEqual([
      ["Name", FieldType.TEXT, 0, true, table!.tableId],
      ["Age", FieldType.NUMBER, 1, false, table!.tableId],
      ["Stage", FieldType.SINGLE_SELECT, 2, false, table!.tableId],
      ["Created", FieldType.CREATED_AT, 3, false, table!.tableId],
    ]);
    expect(fields[0]!.options).toEqual({ max_length: 200 });
    expect(fields[1]!.options).toEqual({ decimals: 0 });
    expect(fields[2]!.options).toEqual({
      choices: [{ id: expect.stringMatching(/^ch_/), name: "Lead" }],
    });
    expect(fields[3]).toMatchObject({ options: {}, description: "When" });

    const created = await eventOf(
      h,
      "catalog.table.created",
      TableCreatedSchema,
      (e) => e.tableId === table!.tableId,
    );
    expect(created).toMatchObject({
      organizationId: t.organizationId,
      databaseId,
      name: "Contacts",
    });
    await expect
      .poll(
        () =>
          eventsOf(h.events, "catalog.field.created", FieldCreatedSchema).filter(
            (e) => e.tableId === table!.tableId,
          ).length,
      )
      .toBe(4);
    const fieldEvents = eventsOf(h.events, "catalog.field.created", FieldCreatedSchema).filter(
      (e) => e.tableId === table!.tableId,
    );
    expect(fieldEvents.map((e) => [e.fieldId, e.name, e.type, e.databaseId])).toEqual(
      fields.map((f) => [f.fieldId, f.name, f.type, databaseId]),
    );
    const audit = await eventOf(
      h,
      "audit.table.created",
      AuditEventSchema,
      (e) => e.target?.id === table!.tableId,
    );
    expect(audit).toMatchObject({ databaseId, tableId: table!.tableId, action: "table.created" });
    await expect
      .poll(
        () =>
          eventsOf(h.events, "audit.field.created", AuditEventSchema).filter(
            (e) => e.tableId === table!.tableId,
          ).length,
      )
      .toBe(4);
  });

  it("creates a table without fields", async () => {
    const { table, fields } = await newTable("Empty");
    expect(table!.name).toBe("Empty");
    expect(fields).toEqual([]);
  });

  it("refuses a name used in the database regardless of case, but not in another database", async () => {
    await newTable("Orders");
    const before = await stateOf(h.db, t.organizationId);
    for (const name of ["Orders", "orders", " ORDERS "]) {
      expect(await failureOf(newTable(name))).toMatchObject({
        code: 6,
        reason: "table_name_taken",
      });
    }
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
    const { database: other } = await h.catalog.createDatabase(
      { organizationId: t.organizationId, name: "Other", description: "" },
      await as(t.owner),
    );
    const { table } = await h.catalog.createTable(
      { databaseId: other!.databaseId, name: "Orders", description: "", fields: [] },
      await as(t.owner),
    );
    expect(table!.name).toBe("Orders");
  });

  it("compares non-ASCII names regardless of case too", async () => {
    await newTable("Élèves");
    expect(await reasonOf(newTable("ÉLÈVES"))).toBe("table_name_taken");
  });

  it("folds names by foldName, not by the database's lower(), and writes nothing when taken", async () => {
    // Under C.UTF-8 PostgreSQL's lower("İ") is "i" while JavaScript's is "i̇" (i and U+0307),
    // which records resolves references by; "é" precomposed and "e" with U+0301 are one name.
    const dotted = "i\u0307";
    await newTable("İstanbul");
    await newTable("Café");
    const before = await stateOf(h.db, t.organizationId);
    for (const name of [`${dotted}stanbul`, "I\u0307STANBUL", "Cafe\u0301", "CAFE\u0301"]) {
      expect(await failureOf(newTable(name))).toMatchObject({
        code: 6,
        reason: "table_name_taken",
      });
    }
    for (const fields of [
      [def("İ", FieldType.TEXT), def(dotted, FieldType.TEXT)],
      [def("Café", FieldType.TEXT), def("cafe\u0301", FieldType.TEXT)],
    ]) {
      expect(await failureOf(newTable("Folded", fields))).toMatchObject({
        code: 6,
        reason: "field_name_taken",
      });
    }
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
    // "İ" and "i" are two names under the rule, so records tells them apart too.
    expect((await newTable("istanbul")).table!.name).toBe("istanbul");
    const { fields } = await newTable("Two", [def("İ", FieldType.TEXT), def("i", FieldType.TEXT)]);
    expect(fields.map((f) => f.name)).toEqual(["İ", "i"]);
  });

  it("creates all or nothing: one bad field refuses the table", async () => {
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await optionErrorsOf(
        newTable("Partial", [
          def("Fine", FieldType.TEXT),
          def("Price", FieldType.NUMBER, { options: { decimals: 11 } }),
          def("Kind", FieldType.SINGLE_SELECT, {
            options: { choices: [{ name: "A" }, { name: "a" }] },
          }),
          def("Stamp", FieldType.UPDATED_AT, { required: true }),
        ]),
      ),
    ).toEqual([
      { key: "fields.1.options.decimals", message: "must be an integer from 0 to 10" },
      {
        key: "fields.2.options.choices.1.name",
        message: "duplicates choice 0 (names are unique regardless of case)",
      },
      { key: "fields.3.required", message: "cannot be true for a read-only type" },
    ]);
    expect(
      await validationOf(
        newTable("Partial", [def(" ", FieldType.TEXT), def("Typeless", FieldType.UNSPECIFIED)]),
      ),
    ).toEqual([
      {
        key: "fields.0.name",
        message: "must be 1-100 characters",
        source: "body",
        code: "too_short",
      },
      {
        key: "fields.1.type",
        message: expect.stringMatching(/^must be one of text, long_text, /),
        source: "body",
        code: "invalid_value",
      },
    ]);
    expect(
      await reasonOf(
        newTable("Partial", [def("Same", FieldType.TEXT), def("SAME", FieldType.NUMBER)]),
      ),
    ).toBe("field_name_taken");
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("refuses viewers (403), outsiders and missing databases (404)", async () => {
    const call = { databaseId, name: "Nope", description: "", fields: [] };
    expect(await failureOf(h.catalog.createTable(call, await as(t.viewer)))).toMatchObject({
      code: 7,
      reason: "organization_forbidden",
    });
    expect(await reasonOf(h.catalog.createTable(call, await as(t.outsider)))).toBe(
      "database_not_found",
    );
    expect(
      await reasonOf(h.catalog.createTable({ ...call, databaseId: 99999999n }, await as(t.owner))),
    ).toBe("database_not_found");
    expect(
      await validationOf(h.catalog.createTable({ ...call, name: "" }, await as(t.owner))),
    ).toEqual([
      { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
    ]);
  });
});

describe("the tables of one database", () => {
  it("are at most 1000, even when creates race for the last places", async () => {
    const { database } = await h.catalog.createDatabase(
      { organizationId: t.organizationId, name: "Full", description: "" },
      await as(t.owner),
    );
    const full = database!.databaseId;
    // 997 tables made directly (the API would take minutes), then three places left for eight.
    await h.db.query(
      `insert into catalog.tables (database_id, name, description)
       select $1, 'T' || n, '' from generate_series(1, 997) as n`,
      [full.toString()],
    );
    const answers = await Promise.all(
      Array.from({ length: 8 }, async (_, i) =>
        h.catalog
          .createTable(
            { databaseId: full, name: `Late ${i}`, description: "", fields: [] },
            await as(t.editor),
          )
          .then(
            () => "created",
            (error: unknown) => errorInfoOf(error)?.reason,
          ),
      ),
    );
    expect(answers.filter((a) => a === "created")).toHaveLength(3);
    expect(answers.filter((a) => a === "table_limit_exceeded")).toHaveLength(5);
    const { rows } = await h.db.query(
      "select count(*)::int as n from catalog.tables where database_id = $1",
      [full.toString()],
    );
    expect(rows[0].n).toBe(1000);
    const refused = await failureOf(
      h.catalog.createTable(
        { databaseId: full, name: "One more", description: "", fields: [] },
        await as(t.owner),
      ),
    );
    expect(refused).toMatchObject({ code: 8, reason: "table_limit_exceeded" });

    // A deleted table's place goes to exactly one of the creates racing for it.
    const { tables } = await h.catalog.listTables({ databaseId: full }, await as(t.owner));
    await h.catalog.deleteTable({ tableId: tables[0]!.tableId }, await as(t.owner));
    const again = await Promise.all(
      Array.from({ length: 8 }, async (_, i) =>
        h.catalog
          .createTable(
            { databaseId: full, name: `Again ${i}`, description: "", fields: [] },
            await as(t.editor),
          )
          .then(
            () => "created",
            (error: unknown) => errorInfoOf(error)?.reason,
          ),
      ),
    );
    expect(again.filter((a) => a === "created")).toHaveLength(1);
    expect(again.filter((a) => a === "table_limit_exceeded")).toHaveLength(7);
    const { rows: after } = await h.db.query(
      "select count(*)::int as n from catalog.tables where database_id = $1",
      [full.toString()],
    );
    expect(after[0].n).toBe(1000);
  });
});

describe("GetTable and ListTables", () => {
  it("returns the table with its fields in position order to every member", async () => {
    const { table, fields } = await newTable("Readable", [
      def("One", FieldType.TEXT),
      def("Two", FieldType.BOOLEAN),
    ]);
    for (const user of [t.owner, t.admin, t.editor, t.viewer]) {
      const got = await h.catalog.getTable({ tableId: table!.tableId }, await as(user));
      expect(got.table).toEqual(table);
      expect(got.fields).toEqual(fields);
    }
    expect(
      await reasonOf(h.catalog.getTable({ tableId: table!.tableId }, await as(t.outsider))),
    ).toBe("table_not_found");
    expect(await reasonOf(h.catalog.getTable({ tableId: 99999999n }, await as(t.owner)))).toBe(
      "table_not_found",
    );
  });

  it("lists the database's tables oldest first", async () => {
    const { database } = await h.catalog.createDatabase(
      { organizationId: t.organizationId, name: "Listed", description: "" },
      await as(t.owner),
    );
    const call = await as(t.editor);
    const a = await h.catalog.createTable(
      { databaseId: database!.databaseId, name: "B first", description: "", fields: [] },
      call,
    );
    const b = await h.catalog.createTable(
      { databaseId: database!.databaseId, name: "A second", description: "", fields: [] },
      call,
    );
    const { tables } = await h.catalog.listTables(
      { databaseId: database!.databaseId },
      await as(t.viewer),
    );
    expect(tables).toEqual([a.table, b.table]);
    expect(
      await reasonOf(
        h.catalog.listTables({ databaseId: database!.databaseId }, await as(t.outsider)),
      ),
    ).toBe("database_not_found");
  });
});

describe("UpdateTable", () => {
  it("renames and describes, announces and audits", async () => {
    const { table } = await newTable("Old name");
    const { table: updated } = await h.catalog.updateTable(
      { tableId: table!.tableId, name: "New name", description: "About" },
      await as(t.editor),
    );
    expect(updated).toMatchObject({ name: "New name", description: "About", databaseId });
    await eventOf(
      h,
      "catalog.table.updated",
      TableUpdatedSchema,
      (e) => e.tableId === table!.tableId && e.name === "New name",
    );
    const audit = await eventOf(
      h,
      "audit.table.updated",
      AuditEventSchema,
      (e) => e.target?.id === table!.tableId,
    );
    expect(auditChangesOf(audit.changesJson).map((c) => [c.key, c.old, c.new])).toEqual([
      ["name", "Old name", "New name"],
      ["description", "", "About"],
    ]);
  });

  it("allows a change of case of its own name and refuses another table's name", async () => {
    const { table } = await newTable("casing");
    const { table: recased } = await h.catalog.updateTable(
      { tableId: table!.tableId, name: "CASING" },
      await as(t.editor),
    );
    expect(recased!.name).toBe("CASING");
    await newTable("Taken name");
    expect(
      await failureOf(
        h.catalog.updateTable({ tableId: table!.tableId, name: "taken NAME" }, await as(t.editor)),
      ),
    ).toMatchObject({ code: 6, reason: "table_name_taken" });
  });

  it("refuses a rename to another table's name under foldName, changing nothing", async () => {
    const { table } = await newTable("Dotless i");
    await newTable("İzmir");
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await failureOf(
        h.catalog.updateTable({ tableId: table!.tableId, name: "i\u0307zmir" }, await as(t.editor)),
      ),
    ).toMatchObject({ code: 6, reason: "table_name_taken" });
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
    const { table: renamed } = await h.catalog.updateTable(
      { tableId: table!.tableId, name: "izmir" },
      await as(t.editor),
    );
    expect(renamed!.name).toBe("izmir");
  });

  it("refuses viewers, outsiders and missing tables", async () => {
    const { table } = await newTable("Guarded table");
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await reasonOf(
        h.catalog.updateTable({ tableId: table!.tableId, name: "X" }, await as(t.viewer)),
      ),
    ).toBe("organization_forbidden");
    expect(
      await reasonOf(
        h.catalog.updateTable({ tableId: table!.tableId, name: "X" }, await as(t.outsider)),
      ),
    ).toBe("table_not_found");
    expect(
      await reasonOf(h.catalog.updateTable({ tableId: 99999999n, name: "X" }, await as(t.owner))),
    ).toBe("table_not_found");
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });
});

describe("DeleteTable", () => {
  it("deletes the table with its fields and announces it", async () => {
    const { table } = await newTable("Doomed table", [
      def("A", FieldType.TEXT),
      def("B", FieldType.NUMBER),
    ]);
    const { deletedId } = await h.catalog.deleteTable(
      { tableId: table!.tableId },
      await as(t.admin),
    );
    expect(deletedId).toBe(table!.tableId);
    expect(await reasonOf(h.catalog.getTable({ tableId: table!.tableId }, await as(t.owner)))).toBe(
      "table_not_found",
    );
    const { rows } = await h.db.query(
      "select count(*)::int as n from catalog.fields where table_id = $1",
      [table!.tableId.toString()],
    );
    expect(rows[0].n).toBe(0);
    const event = await eventOf(
      h,
      "catalog.table.deleted",
      TableDeletedSchema,
      (e) => e.tableId === table!.tableId,
    );
    expect(event).toMatchObject({ organizationId: t.organizationId, databaseId });
    await eventOf(
      h,
      "audit.table.deleted",
      AuditEventSchema,
      (e) => e.target?.id === table!.tableId,
    );
    // Its name is free again.
    const { table: again } = await newTable("Doomed table");
    expect(again!.tableId).not.toBe(table!.tableId);
  });

  it("refuses viewers and outsiders", async () => {
    const { table } = await newTable("Kept table");
    expect(
      await reasonOf(h.catalog.deleteTable({ tableId: table!.tableId }, await as(t.viewer))),
    ).toBe("organization_forbidden");
    expect(
      await reasonOf(h.catalog.deleteTable({ tableId: table!.tableId }, await as(t.outsider))),
    ).toBe("table_not_found");
    expect(
      (await h.catalog.getTable({ tableId: table!.tableId }, await as(t.owner))).table,
    ).toEqual(table);
  });
});

describe("GetTableSchema", () => {
  it("answers services with the table, its fields in order and its organization", async () => {
    const { table, fields } = await newTable("Schema", [
      def("First", FieldType.EMAIL),
      def("Second", FieldType.JSON),
    ]);
    const schema = await h.catalog.getTableSchema({ tableId: table!.tableId }, await as(SERVICE));
    expect(schema.table).toEqual(table);
    expect(schema.fields).toEqual(fields);
    expect(schema.organizationId).toBe(t.organizationId);
    expect(schema.table!.databaseId).toBe(databaseId);
  });

  it("refuses users, even owners, and answers table_not_found for missing tables", async () => {
    const { table } = await newTable("Internal");
    expect(
      await failureOf(h.catalog.getTableSchema({ tableId: table!.tableId }, await as(t.owner))),
    ).toMatchObject({ code: 7, reason: "internal_only" });
    expect(await reasonOf(h.catalog.getTableSchema({ tableId: table!.tableId }))).toBe(
      "unauthorized",
    );
    expect(
      await reasonOf(h.catalog.getTableSchema({ tableId: 99999999n }, await as(SERVICE))),
    ).toBe("table_not_found");
  });
});

describe("ResolveField", () => {
  it("answers services with a field's table and organization, field_not_found once it is gone", async () => {
    const { table, fields } = await newTable("Resolved", [def("Only", FieldType.TEXT)]);
    const fieldId = fields[0]!.fieldId;
    expect(await h.catalog.resolveField({ fieldId }, await as(SERVICE))).toMatchObject({
      tableId: table!.tableId,
      organizationId: t.organizationId,
    });
    expect(await failureOf(h.catalog.resolveField({ fieldId }, await as(t.owner)))).toMatchObject({
      code: 7,
      reason: "internal_only",
    });
    await h.catalog.deleteField({ fieldId }, await as(t.owner));
    for (const id of [fieldId, 99999999n]) {
      expect(await reasonOf(h.catalog.resolveField({ fieldId: id }, await as(SERVICE)))).toBe(
        "field_not_found",
      );
    }
  });
});

describe("ListTableIds", () => {
  it("pages through every table's id in order, without deleted tables, for services only", async () => {
    const { database: other } = await h.catalog.createDatabase(
      { organizationId: t.organizationId, name: "Listed elsewhere", description: "" },
      await as(t.owner),
    );
    const made = [];
    for (const name of ["Listed 1", "Listed 2", "Listed 3"])
      made.push((await newTable(name)).table!);
    const elsewhere = (
      await h.catalog.createTable(
        { databaseId: other!.databaseId, name: "Listed 4", description: "", fields: [] },
        await as(t.editor),
      )
    ).table!;
    await h.catalog.deleteTable({ tableId: made[1]!.tableId }, await as(t.editor));

    // Other tests of the file may have made more tables than one page holds.
    const pages = async (limit: number) => {
      const ids: bigint[] = [];
      for (let after = 0n; ; ) {
        const { tableIds } = await h.catalog.listTableIds(
          { afterTableId: after, limit },
          await as(SERVICE),
        );
        expect(tableIds.length).toBeLessThanOrEqual(limit || 1000);
        ids.push(...tableIds);
        if (tableIds.length < (limit || 1000)) return ids;
        after = tableIds.at(-1)!;
      }
    };
    const all = await pages(0);
    expect(all).toEqual([...all].sort((a, b) => (a < b ? -1 : 1)));
    expect(new Set(all).size).toBe(all.length);
    expect(all).toEqual(
      expect.arrayContaining([made[0]!.tableId, made[2]!.tableId, elsewhere.tableId]),
    );
    expect(all).not.toContain(made[1]!.tableId);

    const paged = await pages(7);
    expect(paged).toEqual(all);
    expect(
      (await h.catalog.listTableIds({ afterTableId: all.at(-1)! }, await as(SERVICE))).tableIds,
    ).toEqual([]);
  });

  it("refuses users and a limit past a page", async () => {
    expect(await failureOf(h.catalog.listTableIds({}, await as(t.owner)))).toMatchObject({
      code: 7,
      reason: "internal_only",
    });
    expect(await reasonOf(h.catalog.listTableIds({}))).toBe("unauthorized");
    for (const limit of [-1, 1001]) {
      expect(await validationOf(h.catalog.listTableIds({ limit }, await as(SERVICE)))).toEqual([
        {
          key: "limit",
          message: "must be between 1 and 1000",
          source: "body",
          code: "out_of_range",
        },
      ]);
    }
  });
});
