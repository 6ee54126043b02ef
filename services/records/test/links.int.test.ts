import { create, type JsonObject, toBinary } from "@bufbuild/protobuf";
import { auditChangesOf, type SchemaField, SUBJECTS, tableSchemaOf } from "@rowbase/kit";
import { FieldSchema, FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  FieldCreatedSchema,
  FieldDeletedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { EventMetaSchema } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { ResponseFormat } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { userTable } from "../src/db/user-tables/names.js";
import {
  as,
  def,
  eventsOf,
  eventually,
  failureOf,
  type Harness,
  SERVICE,
  startHarness,
  type Team,
  team,
  validationOf,
} from "./harness.js";

// Link fields on the per-table storage: the junction a link and its inverse share, made and
// dropped by catalog's events; writes from either side seen from the other at once; refused
// writes that change nothing; the linked records' display; values cut at 1000; row ids in audit
// and change events; and the check of a link made single.
//
// The links are made through catalog, as a client makes them; the junction's own tests also
// hand records catalog's events again, as a late or repeated delivery would.

let h: Harness;
let t: Team;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

/** A field id catalog never gave, for an event of a link that does not exist. */
const UNKNOWN_LINK_ID = 8_000_000_000n;

interface Side {
  tableId: bigint;
  databaseId: bigint;
  /** The link field's id (decimal) and name. */
  link: string;
  linkName: string;
  /** Field id (decimal) by name, the link's included. */
  id: Record<string, string>;
  fields: SchemaField[];
}

interface Pair {
  a: Side;
  b: Side;
}

function fieldCreated(
  side: { tableId: bigint; databaseId: bigint },
  fieldId: bigint,
  options: JsonObject,
) {
  const eventId = crypto.randomUUID();
  return {
    subject: SUBJECTS.fieldCreated,
    eventId,
    payload: toBinary(
      FieldCreatedSchema,
      create(FieldCreatedSchema, {
        meta: create(EventMetaSchema, { eventId }),
        organizationId: t.organizationId,
        databaseId: side.databaseId,
        tableId: side.tableId,
        fieldId,
        name: "link",
        type: FieldType.LINK,
        options,
      }),
    ),
  };
}

function fieldDeleted(
  side: { tableId: bigint; databaseId: bigint },
  fieldId: bigint,
  options: JsonObject,
) {
  const eventId = crypto.randomUUID();
  return {
    subject: SUBJECTS.fieldDeleted,
    eventId,
    payload: toBinary(
      FieldDeletedSchema,
      create(FieldDeletedSchema, {
        meta: create(EventMetaSchema, { eventId }),
        organizationId: t.organizationId,
        databaseId: side.databaseId,
        tableId: side.tableId,
        fieldId,
        type: FieldType.LINK,
        options,
      }),
    ),
  };
}

/**
 * Two tables of one database, People (Name) and `bFields` (Title, Budget unless said), linked
 * by People.Projects and its inverse Projects.People, made through catalog as a client makes
 * them (catalog applies them to records before it answers).
 */
async function linkedTables(
  options: {
    bFields?: ReturnType<typeof def>[];
    /** Whether each side links many records (true unless said). */
    aMultiple?: boolean;
    bMultiple?: boolean;
    aRequired?: boolean;
  } = {},
): Promise<Pair> {
  const owner = await as(t.owner);
  const { database } = await h.catalog.createDatabase(
    { organizationId: t.organizationId, name: "Base", description: "" },
    owner,
  );
  const databaseId = database!.databaseId;
  const made = async (name: string, fields: ReturnType<typeof def>[]) =>
    (await h.catalog.createTable({ databaseId, name, description: "", fields }, owner)).table!
      .tableId;
  const aTable = await made("People", [def("Name", FieldType.TEXT)]);
  const bTable = await made(
    "Projects",
    options.bFields ?? [def("Budget", FieldType.NUMBER), def("Title", FieldType.TEXT)],
  );
  const { field: aLink } = await h.catalog.createField(
    {
      tableId: aTable,
      field: {
        name: "Projects",
        type: FieldType.LINK,
        options: { table_id: Number(bTable), multiple: options.aMultiple ?? true },
        required: options.aRequired ?? false,
        description: "",
      },
    },
    owner,
  );
  const bLink = BigInt(aLink!.options!.inverse_field_id as number);
  if (options.bMultiple === false) {
    await h.catalog.updateField(
      { fieldId: bLink, options: { table_id: Number(aTable), multiple: false } },
      owner,
    );
  }
  const side = async (tableId: bigint, link: bigint): Promise<Side> => {
    const schema = tableSchemaOf(
      await h.catalog.getTableSchema({ tableId }, await as(SERVICE)),
      h.logger,
    );
    const linkName = schema.fields.find((f) => f.id === link.toString())!.name;
    return {
      tableId,
      databaseId,
      link: link.toString(),
      linkName,
      id: Object.fromEntries(schema.fields.map((f) => [f.name, f.id])),
      fields: schema.fields,
    };
  };
  const a = await side(aTable, aLink!.fieldId);
  const b = await side(bTable, bLink);
  expect([a.linkName, b.linkName]).toEqual(["Projects", "People"]);
  return { a, b };
}

/** The pairs of the link's junction, as (People row, Projects row), in order. */
async function pairsOf(pair: Pair): Promise<[number, number][]> {
  const { rows } = await h.db.query(
    `select j.row_id::text, j.linked_row_id::text from org_${t.organizationId}.l_${pair.a.link} j
     order by j.row_id, j.linked_row_id`,
  );
  return rows.map((row: { row_id: string; linked_row_id: string }) => [
    Number(row.row_id),
    Number(row.linked_row_id),
  ]);
}

async function versionsOf(side: Side): Promise<Record<string, string>> {
  const { rows } = await h.db.query(
    `select row_id::text, version::text from ${userTable(t.organizationId, side.tableId)} order by 1`,
  );
  return Object.fromEntries(
    rows.map((row: { row_id: string; version: string }) => [row.row_id, row.version]),
  );
}

async function junctionExists(name: string): Promise<boolean> {
  const { rows } = await h.db.query("select to_regclass($1) is not null as found", [name]);
  return rows[0].found;
}

/** Creates records of a side. */
async function createIn(side: Side, datas: JsonObject[]) {
  const { records } = await h.records.batchCreateRecords(
    { tableId: side.tableId, records: datas.map((data) => ({ data })) },
    await as(t.editor),
  );
  return records;
}

async function getIn(side: Side, rowId: bigint, format = ResponseFormat.IDS) {
  const { record } = await h.records.getRecord(
    { tableId: side.tableId, rowId, responseFormat: format },
    await as(t.editor),
  );
  return record!;
}

async function updateIn(side: Side, rowId: bigint, data: JsonObject) {
  return h.records.updateRecord({ tableId: side.tableId, rowId, data }, await as(t.editor));
}

const link = (rowId: bigint, display: string) => ({ row_id: Number(rowId), display });

describe("the junction", () => {
  it("is made by the first of the pair's events, found made by the second, and dropped with the field", async () => {
    const pair = await linkedTables();
    const name = `org_${t.organizationId}.l_${pair.a.link}`;
    expect(await junctionExists(name)).toBe(true);
    const service = await as(SERVICE);
    // Handed over again under new event ids: nothing more to do.
    const aOptions = pair.a.fields.at(-1)!.options;
    await h.records.applyCatalogEvent(fieldCreated(pair.a, BigInt(pair.a.link), aOptions), service);
    expect(await junctionExists(name)).toBe(true);
    const p = await createIn(pair.b, [{ Title: "Alpha" }]);
    await createIn(pair.a, [{ Name: "Ada", Projects: [Number(p[0]!.rowId)] }]);
    expect(await pairsOf(pair)).toHaveLength(1);

    await h.records.applyCatalogEvent(
      fieldDeleted(pair.b, BigInt(pair.b.link), pair.b.fields.at(-1)!.options),
      service,
    );
    expect(await junctionExists(name)).toBe(false);
    await h.records.applyCatalogEvent(fieldDeleted(pair.a, BigInt(pair.a.link), aOptions), service);
    expect(await junctionExists(name)).toBe(false);
  });

  it("refuses a link whose event names no inverse field, with a 400", async () => {
    const pair = await linkedTables();
    const failure = await validationOf(
      h.records.applyCatalogEvent(
        fieldCreated(pair.a, UNKNOWN_LINK_ID, {
          table_id: Number(pair.b.tableId),
          multiple: true,
        }),
        await as(SERVICE),
      ),
    );
    expect(failure).toEqual([expect.objectContaining({ key: "type" })]);
  });
});

describe("link values", () => {
  it("written from either side, are seen from the other at once, with the linked records' display", async () => {
    const pair = await linkedTables();
    const [alpha, beta] = await createIn(pair.b, [{ Title: "Alpha" }, { Title: "" }]);
    const [ada] = await createIn(pair.a, [
      { Name: "Ada", Projects: [Number(beta!.rowId), { row_id: Number(alpha!.rowId) }] },
    ]);
    // The write answers the links with their display; an empty primary value shows the row id.
    expect(ada!.data[pair.a.link]).toEqual([
      link(alpha!.rowId, "Alpha"),
      link(beta!.rowId, String(beta!.rowId)),
    ]);
    const fromB = await getIn(pair.b, alpha!.rowId);
    expect(fromB.data[pair.b.link]).toEqual([link(ada!.rowId, "Ada")]);
    // A link written from the other side: only the written record changes.
    const before = await versionsOf(pair.a);
    const { record: betaAfter } = await updateIn(pair.b, beta!.rowId, {
      People: [],
    });
    expect(betaAfter!.data[pair.b.link]).toEqual([]);
    expect(await versionsOf(pair.a)).toEqual(before);
    const adaNow = await getIn(pair.a, ada!.rowId);
    expect(adaNow.data[pair.a.link]).toEqual([link(alpha!.rowId, "Alpha")]);
    expect(adaNow.updatedAt).toEqual(ada!.updatedAt);
    // A list shows the same values.
    const list = await h.records.listRecords(
      { tableId: pair.b.tableId, limit: 10 },
      await as(t.editor),
    );
    expect(list.records.map((r) => r.data[pair.b.link])).toEqual([[link(ada!.rowId, "Ada")], []]);
    expect(list.records.every((r) => r.linksTruncated.length === 0)).toBe(true);
  });

  it("show a table's row ids when it has no text field", async () => {
    const pair = await linkedTables({ bFields: [def("Budget", FieldType.NUMBER)] });
    const [p] = await createIn(pair.b, [{ Budget: 5 }]);
    const [ada] = await createIn(pair.a, [{ Name: "Ada", Projects: [Number(p!.rowId)] }]);
    expect(ada!.data[pair.a.link]).toEqual([link(p!.rowId, String(p!.rowId))]);
  });

  it("show a long text primary field as stored", async () => {
    const pair = await linkedTables({
      bFields: [def("Budget", FieldType.NUMBER), def("Notes", FieldType.LONG_TEXT)],
    });
    const [p] = await createIn(pair.b, [{ Notes: "**bold**" }]);
    const [ada] = await createIn(pair.a, [{ Name: "Ada", Projects: [Number(p!.rowId)] }]);
    expect(ada!.data[pair.a.link]).toEqual([link(p!.rowId, "**bold**")]);
  });

  it("are written in batches, and refused by the key of the record's value", async () => {
    const pair = await linkedTables();
    const [alpha, beta] = await createIn(pair.b, [{ Title: "Alpha" }, { Title: "Beta" }]);
    const people = await createIn(pair.a, [
      { Name: "Ada", Projects: [Number(alpha!.rowId)] },
      { Name: "Bob" },
    ]);
    const { records } = await h.records.batchUpdateRecords(
      {
        tableId: pair.a.tableId,
        records: [
          { rowId: people[0]!.rowId, data: { Projects: [Number(beta!.rowId)] } },
          {
            rowId: people[1]!.rowId,
            data: { [pair.a.link]: [Number(alpha!.rowId), Number(beta!.rowId)] },
          },
        ],
      },
      await as(t.editor),
    );
    expect(records.map((r) => r.data[pair.a.link])).toEqual([
      [link(beta!.rowId, "Beta")],
      [link(alpha!.rowId, "Alpha"), link(beta!.rowId, "Beta")],
    ]);
    expect(await pairsOf(pair)).toEqual([
      [Number(people[0]!.rowId), Number(beta!.rowId)],
      [Number(people[1]!.rowId), Number(alpha!.rowId)],
      [Number(people[1]!.rowId), Number(beta!.rowId)],
    ]);
    // A batch naming a missing row: 400 on that record's key, nothing written.
    const pairs = await pairsOf(pair);
    const versions = await versionsOf(pair.a);
    const failure = await validationOf(
      h.records.batchUpdateRecords(
        {
          tableId: pair.a.tableId,
          records: [
            { rowId: people[0]!.rowId, data: { Name: "Changed", Projects: [] } },
            {
              rowId: people[1]!.rowId,
              data: { [pair.a.link]: [Number(alpha!.rowId) + 1_000_000] },
            },
          ],
        },
        await as(t.editor),
      ),
    );
    expect(failure).toEqual([
      expect.objectContaining({ key: `records.1.data.${pair.a.link}`, code: "not_found" }),
    ]);
    expect(await pairsOf(pair)).toEqual(pairs);
    expect(await versionsOf(pair.a)).toEqual(versions);
  });

  it("refuse rows that are not the linked table's, and values of the wrong shape, changing nothing", async () => {
    const pair = await linkedTables();
    const [alpha, gone] = await createIn(pair.b, [{ Title: "Alpha" }, { Title: "Gone" }]);
    const [ada] = await createIn(pair.a, [{ Name: "Ada", Projects: [Number(alpha!.rowId)] }]);
    await h.records.deleteRecord(
      { tableId: pair.b.tableId, rowId: gone!.rowId },
      await as(t.editor),
    );
    const pairs = await pairsOf(pair);
    const versions = await versionsOf(pair.a);
    const refused = async (value: unknown, code: string) => {
      const failure = await validationOf(
        updateIn(pair.a, ada!.rowId, { Projects: value as JsonObject }),
      );
      expect(failure).toEqual([expect.objectContaining({ key: "Projects", code })]);
      expect(await pairsOf(pair)).toEqual(pairs);
      expect(await versionsOf(pair.a)).toEqual(versions);
    };
    await refused([Number(gone!.rowId)], "not_found");
    await refused([Number(ada!.rowId)], "not_found"); // a row of the other table
    await refused([999_999_999_999], "not_found");
    await refused(
      Array.from({ length: 1001 }, (_, i) => i + 1),
      "too_long",
    );
    await refused("x", "invalid_type");
    await refused([Number(alpha!.rowId), "7"], "invalid_type");
    // A create naming a missing row creates nothing.
    const failure = await validationOf(
      h.records.createRecord(
        { tableId: pair.a.tableId, data: { Name: "Eve", Projects: [Number(gone!.rowId)] } },
        await as(t.editor),
      ),
    );
    expect(failure).toEqual([expect.objectContaining({ key: "Projects", code: "not_found" })]);
    expect(await versionsOf(pair.a)).toEqual(versions);
  });

  it("hold one linker per record when the inverse links one record", async () => {
    const pair = await linkedTables({ bMultiple: false });
    const [alpha, beta] = await createIn(pair.b, [{ Title: "Alpha" }, { Title: "Beta" }]);
    const [ada] = await createIn(pair.a, [{ Name: "Ada", Projects: [Number(alpha!.rowId)] }]);
    const pairs = await pairsOf(pair);
    const second = await validationOf(
      h.records.createRecord(
        { tableId: pair.a.tableId, data: { Name: "Bob", Projects: [Number(alpha!.rowId)] } },
        await as(t.editor),
      ),
    );
    expect(second).toEqual([expect.objectContaining({ key: "Projects", code: "invalid_value" })]);
    const both = await validationOf(
      h.records.batchCreateRecords(
        {
          tableId: pair.a.tableId,
          records: [
            { data: { Name: "Cy", Projects: [Number(beta!.rowId)] } },
            { data: { Name: "Di", Projects: [Number(beta!.rowId)] } },
          ],
        },
        await as(t.editor),
      ),
    );
    expect(both).toEqual([
      expect.objectContaining({ key: "records.1.data.Projects", code: "invalid_value" }),
    ]);
    expect(await pairsOf(pair)).toEqual(pairs);
    // Ada may keep her own link, and move it.
    const { record } = await updateIn(pair.a, ada!.rowId, {
      Projects: [Number(alpha!.rowId), Number(beta!.rowId)],
    });
    expect(record!.data[pair.a.link]).toHaveLength(2);
  });

  it("are required like any value, and go with a deleted record", async () => {
    const pair = await linkedTables({ aRequired: true });
    const [alpha] = await createIn(pair.b, [{ Title: "Alpha" }]);
    const missing = await validationOf(
      h.records.createRecord(
        { tableId: pair.a.tableId, data: { Name: "Eve" } },
        await as(t.editor),
      ),
    );
    expect(missing).toEqual([expect.objectContaining({ key: "Projects", code: "required" })]);
    const [ada] = await createIn(pair.a, [{ Name: "Ada", Projects: [Number(alpha!.rowId)] }]);
    const cleared = await validationOf(updateIn(pair.a, ada!.rowId, { Projects: [] }));
    expect(cleared).toEqual([expect.objectContaining({ key: "Projects", code: "required" })]);
    await h.records.deleteRecord(
      { tableId: pair.b.tableId, rowId: alpha!.rowId },
      await as(t.editor),
    );
    expect(await pairsOf(pair)).toEqual([]);
    expect((await getIn(pair.a, ada!.rowId)).data[pair.a.link]).toEqual([]);
  });

  it("show their first 1000 linked records, and name the links cut", async () => {
    const pair = await linkedTables();
    const [ada] = await createIn(pair.a, [{ Name: "Ada" }]);
    const { rows } = await h.db.query(
      `insert into ${userTable(t.organizationId, pair.b.tableId)} (row_id, created_by, updated_by)
       select nextval('records.row_id_seq'), 'system', 'system' from generate_series(1, 1001)
       returning row_id::text`,
    );
    await h.db.query(
      `insert into org_${t.organizationId}.l_${pair.a.link} (row_id, linked_row_id)
       select $1::bigint, unnest($2::bigint[])`,
      [ada!.rowId.toString(), rows.map((row: { row_id: string }) => row.row_id)],
    );
    const record = await getIn(pair.a, ada!.rowId);
    expect(record.data[pair.a.link]).toHaveLength(1000);
    expect(record.linksTruncated).toEqual([pair.a.link]);
    const named = await getIn(pair.a, ada!.rowId, ResponseFormat.NAMES);
    expect(named.linksTruncated).toEqual(["Projects"]);
    const list = await h.records.listRecords({ tableId: pair.a.tableId }, await as(t.editor));
    expect(list.records[0]!.linksTruncated).toEqual([pair.a.link]);
    // The other side's records link one record each: nothing cut.
    const first = await getIn(pair.b, BigInt(rows[0].row_id));
    expect(first.data[pair.b.link]).toEqual([link(ada!.rowId, "Ada")]);
    expect(first.linksTruncated).toEqual([]);
  });
});

describe("changes of links", () => {
  it("hold row ids in audit events and in the change log, and count no record", async () => {
    const pair = await linkedTables();
    const [alpha, beta] = await createIn(pair.b, [{ Title: "Alpha" }, { Title: "Beta" }]);
    const usage = async () =>
      Number(
        (
          await h.db.query("select records.record_usage($1) as records", [
            t.organizationId.toString(),
          ])
        ).rows[0].records,
      );
    const count = await usage();
    const [ada] = await createIn(pair.a, [{ Name: "Ada", Projects: [Number(alpha!.rowId)] }]);
    expect(await usage()).toBe(count + 1);
    await updateIn(pair.a, ada!.rowId, {
      Projects: [Number(beta!.rowId), Number(alpha!.rowId)],
    });
    await updateIn(pair.b, beta!.rowId, { People: [] });
    expect(await usage()).toBe(count + 1);
    await h.records.deleteRecord(
      { tableId: pair.a.tableId, rowId: ada!.rowId },
      await as(t.editor),
    );

    const audit = (action: string) =>
      eventually(() => {
        const found = eventsOf(h.events, `audit.${action}`, AuditEventSchema).filter(
          (e) => e.target?.id === ada!.rowId,
        );
        if (found.length === 0) throw new Error(`no ${action}`);
        return found.map((e) => auditChangesOf(e.changesJson));
      });
    const [a, b] = [Number(alpha!.rowId), Number(beta!.rowId)];
    expect((await audit("record.created"))[0]).toContainEqual({
      key: pair.a.link,
      label: "Projects",
      old: undefined,
      new: [a],
    });
    expect((await audit("record.updated"))[0]).toEqual([
      { key: pair.a.link, label: "Projects", old: [a], new: [a, b] },
    ]);
    expect((await audit("record.deleted"))[0]).toContainEqual({
      key: pair.a.link,
      label: "Projects",
      old: [a],
      new: undefined,
    });
    // Beta's own update: her record's value, not Ada's.
    const betaUpdated = await eventually(() => {
      const found = eventsOf(h.events, "audit.record.updated", AuditEventSchema).find(
        (e) => e.target?.id === beta!.rowId,
      );
      if (!found) throw new Error("no update of Beta");
      return auditChangesOf(found.changesJson);
    });
    expect(betaUpdated).toEqual([
      { key: pair.b.link, label: "People", old: [Number(ada!.rowId)], new: undefined },
    ]);

    const { rows } = await h.db.query(
      `select type, data, previous from records.record_change where table_id = $1 and row_id = $2
       order by write_position, ordinal`,
      [pair.a.tableId.toString(), ada!.rowId.toString()],
    );
    expect(rows.map((row: { type: string }) => row.type)).toEqual([
      "created",
      "updated",
      "deleted",
    ]);
    expect(rows[0].data[pair.a.link]).toEqual([a]);
    expect(rows[1].data[pair.a.link]).toEqual([a, b]);
    expect(rows[1].previous).toEqual({ [pair.a.link]: [a] });
  });
});

describe("a link made single", () => {
  const check = async (pair: Pair, multiple: boolean) =>
    h.records.checkFieldTypeChange(
      {
        field: create(FieldSchema, {
          fieldId: BigInt(pair.a.link),
          tableId: pair.a.tableId,
          name: "Projects",
          type: FieldType.LINK,
          options: pair.a.fields.at(-1)!.options,
        }),
        newType: FieldType.LINK,
        newOptions: { ...pair.a.fields.at(-1)!.options, multiple },
        changeId: crypto.randomUUID(),
      },
      await as(SERVICE),
    );

  it("is refused while a record links more than one record, and agreed to after", async () => {
    const pair = await linkedTables();
    const [alpha, beta] = await createIn(pair.b, [{ Title: "Alpha" }, { Title: "Beta" }]);
    const [ada] = await createIn(pair.a, [
      { Name: "Ada", Projects: [Number(alpha!.rowId), Number(beta!.rowId)] },
    ]);
    const refused = await failureOf(check(pair, false));
    expect(refused.reason).toBe("field_type_change_invalid");
    expect(refused.metadata.row_ids).toBe(JSON.stringify([Number(ada!.rowId)]));
    expect(refused.metadata.count).toBe("1");
    expect(await check(pair, true)).toMatchObject({});
    await updateIn(pair.a, ada!.rowId, { Projects: [Number(beta!.rowId)] });
    expect(await check(pair, false)).toMatchObject({});
    expect(await pairsOf(pair)).toEqual([[Number(ada!.rowId), Number(beta!.rowId)]]);
  });
});

describe("a table linked to itself", () => {
  it("shows each side's links from the other, and unlinks records deleted in a batch", async () => {
    const owner = await as(t.owner);
    const { database } = await h.catalog.createDatabase(
      { organizationId: t.organizationId, name: "Base", description: "" },
      owner,
    );
    const databaseId = database!.databaseId;
    const tableId = (
      await h.catalog.createTable(
        { databaseId, name: "People", description: "", fields: [def("Name", FieldType.TEXT)] },
        owner,
      )
    ).table!.tableId;
    const service = await as(SERVICE);
    const { field: mentorsField } = await h.catalog.createField(
      {
        tableId,
        field: {
          name: "Mentors",
          type: FieldType.LINK,
          options: { table_id: Number(tableId) },
          required: false,
          description: "",
        },
      },
      owner,
    );
    const mentors = mentorsField!.fieldId;
    const mentorsOptions = mentorsField!.options!;
    const mentees = BigInt(mentorsOptions.inverse_field_id as number);
    await h.catalog.updateField({ fieldId: mentees, name: "Mentees" }, owner);
    const editor = await as(t.editor);
    const { records: people } = await h.records.batchCreateRecords(
      {
        tableId,
        records: ["Ada", "Bob", "Cy", "Di"].map((Name) => ({ data: { Name } })),
      },
      editor,
    );
    const [ada, bob, cy, di] = people.map((p) => p.rowId) as [bigint, bigint, bigint, bigint];
    const { record: adaNow } = await h.records.updateRecord(
      { tableId, rowId: ada, data: { Mentees: [Number(bob), Number(cy), Number(ada)] } },
      editor,
    );
    expect(adaNow!.data[mentees.toString()]).toEqual([
      link(ada, "Ada"),
      link(bob, "Bob"),
      link(cy, "Cy"),
    ]);
    expect(adaNow!.data[mentors.toString()]).toEqual([link(ada, "Ada")]);
    const { record: bobNow } = await h.records.getRecord({ tableId, rowId: bob }, editor);
    expect(bobNow!.data[mentors.toString()]).toEqual([link(ada, "Ada")]);
    expect(bobNow!.data[mentees.toString()]).toEqual([]);

    // Made required, the mentors link is refused while a record has none.
    const field = create(FieldSchema, {
      fieldId: mentors,
      tableId,
      name: "Mentors",
      type: FieldType.LINK,
      options: mentorsOptions,
    });
    const refused = await failureOf(
      h.records.checkFieldTypeChange(
        { field, newType: FieldType.LINK, newOptions: mentorsOptions, newRequired: true },
        service,
      ),
    );
    expect(refused.reason).toBe("field_type_change_invalid");
    expect(refused.metadata).toMatchObject({ count: "1", row_ids: JSON.stringify([Number(di)]) });

    // A batch delete unlinks the records deleted, on both sides.
    await h.records.batchDeleteRecords({ tableId, rowIds: [ada, bob] }, editor);
    const { rows } = await h.db.query(
      `select count(*)::int as pairs from org_${t.organizationId}.l_${mentors}`,
    );
    expect(rows[0].pairs).toBe(0);
    const { record: cyNow } = await h.records.getRecord({ tableId, rowId: cy }, editor);
    expect(cyNow!.data[mentors.toString()]).toEqual([]);
  });
});

describe("random link writes from both sides", () => {
  it("leave the junction and both sides' values as a model of the pairs says", async () => {
    const pair = await linkedTables();
    const people = (
      await createIn(
        pair.a,
        ["P0", "P1", "P2", "P3"].map((Name) => ({ Name })),
      )
    ).map((r) => r.rowId);
    const projects = (
      await createIn(
        pair.b,
        ["J0", "J1", "J2", "J3"].map((Title) => ({ Title })),
      )
    ).map((r) => r.rowId);
    const names = new Map<bigint, string>([
      ...people.map((id, i) => [id, `P${i}`] as const),
      ...projects.map((id, i) => [id, `J${i}`] as const),
    ]);
    // A small deterministic generator (xorshift), so that a failure repeats.
    let state = 0x2545f491;
    const random = (n: number) => {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      return (state >>> 0) % n;
    };
    const subset = (ids: readonly bigint[]) => ids.filter(() => random(2) === 1);
    const model = new Set<string>();
    const key = (person: bigint, project: bigint) => `${person}:${project}`;
    for (let step = 0; step < 25; step++) {
      const fromA = random(2) === 0;
      const own = fromA ? people : projects;
      const other = fromA ? projects : people;
      const rowId = own[random(own.length)]!;
      const linked = subset(other);
      const { record } = await updateIn(fromA ? pair.a : pair.b, rowId, {
        [fromA ? "Projects" : "People"]: linked.map(Number),
      });
      for (const id of other) {
        const k = fromA ? key(rowId, id) : key(id, rowId);
        if (linked.includes(id)) model.add(k);
        else model.delete(k);
      }
      const sorted = [...linked].sort((x, y) => (x < y ? -1 : 1));
      expect(record!.data[fromA ? pair.a.link : pair.b.link]).toEqual(
        sorted.map((id) => link(id, names.get(id)!)),
      );
      const expected = [...model]
        .map((k) => k.split(":").map(Number) as [number, number])
        .sort((x, y) => x[0] - y[0] || x[1] - y[1]);
      expect(await pairsOf(pair)).toEqual(expected);
      // Any record of either side shows what the model says it links.
      const probeA = random(2) === 0;
      const probe = (probeA ? people : projects)[random(4)]!;
      const shown = await getIn(probeA ? pair.a : pair.b, probe);
      const links = expected
        .filter(([p, j]) => (probeA ? p : j) === Number(probe))
        .map(([p, j]) => BigInt(probeA ? j : p))
        .map((id) => link(id, names.get(id)!));
      expect(shown.data[probeA ? pair.a.link : pair.b.link]).toEqual(links);
    }
  });
});
