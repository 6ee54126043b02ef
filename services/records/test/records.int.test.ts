import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { ResponseFormat, RichTextFormat } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  as,
  createTable,
  def,
  failureOf,
  type Harness,
  reasonOf,
  SERVICE,
  startHarness,
  type Team,
  type TestTable,
  team,
  token,
  validationOf,
} from "./harness.js";
import { storedRows } from "./stored.js";

let h: Harness;
let t: Team;
let table: TestTable;
/** A second table of the same organization, for rows that belong elsewhere. */
let other: TestTable;
/** A table whose Title is required. */
let strict: TestTable;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
  table = await createTable(h, t.owner, t.organizationId);
  other = await createTable(h, t.owner, t.organizationId, [def("Title", FieldType.TEXT)], "Other");
  strict = await createTable(
    h,
    t.owner,
    t.organizationId,
    [
      def("Title", FieldType.TEXT, undefined, true),
      def(
        "Tags",
        FieldType.MULTI_SELECT,
        {
          choices: [{ name: "x" }],
        },
        true,
      ),
      def("Count", FieldType.NUMBER),
    ],
    "Strict",
  );
});

afterAll(async () => {
  await h?.stop();
});

async function rowsIn(tableId: bigint): Promise<JsonObject[]> {
  return (await storedRows(h, tableId)).map((row) => row.data);
}

async function create(data: JsonObject, tableId = table.tableId, who = t.editor) {
  const { record } = await h.records.createRecord({ tableId, data }, await as(who));
  return record!;
}

/** The record's data keyed by field name. */
function byName(data: JsonObject | undefined, fields = table) {
  const names = Object.fromEntries(Object.entries(fields.id).map(([name, id]) => [id, name]));
  return Object.fromEntries(Object.entries(data ?? {}).map(([id, value]) => [names[id], value]));
}

describe("creating a record", () => {
  it("stores the values by field id and answers with every field, null when empty", async () => {
    const before = Date.now();
    const record = await create({ Name: "Ada", [table.id.Age!]: "36.25", tags: ["A", "b", "a"] });
    expect(record.tableId).toBe(table.tableId);
    expect(Object.keys(record.data!)).toEqual(table.fields.map((f) => f.fieldId.toString()));
    const values = byName(record.data);
    expect(values).toMatchObject({
      Name: "Ada",
      Notes: null,
      Age: 36.3,
      Vip: null,
      Tags: ["a", "b"],
      Meta: null,
      Doc: null,
    });
    expect(typeof values.Seq).toBe("number");
    const created = record.createdAt!;
    const ms = Number(created.seconds) * 1000 + created.nanos / 1e6;
    expect(ms).toBeGreaterThanOrEqual(before - 1000);
    expect(values.Created).toBe(new Date(ms).toISOString());
    expect(values.Updated).toBe(values.Created);

    const [row] = await storedRows(h, table.tableId, [record.rowId]);
    expect({ ...row, row_id: undefined, version: undefined }).toEqual({
      row_id: undefined,
      version: undefined,
      organization_id: t.organizationId.toString(),
      data: {
        [table.id.Name!]: "Ada",
        [table.id.Age!]: 36.3,
        [table.id.Tags!]: ["a", "b"],
        [table.id.Seq!]: values.Seq,
      },
      created_by: `user:${t.editor.id}`,
      updated_by: `user:${t.editor.id}`,
    });
  });

  it("numbers records in creation order", async () => {
    const first = byName((await create({})).data).Seq as number;
    const second = byName((await create({})).data).Seq as number;
    expect(second).toBe(first + 1);
  });

  const VALID: Array<[string, JsonValue, JsonValue]> = [
    ["Name", "  spaced  ", "  spaced  "],
    ["Name", "", ""],
    ["Name", "é".repeat(50), "é".repeat(50)],
    ["Notes", "# Title\n\n**bold**", "# Title\n\n**bold**"],
    ["Age", 12, 12],
    ["Age", "-7.25", -7.3],
    ["Age", 1.05, 1.1],
    ["Age", "", null],
    ["Vip", true, true],
    ["Vip", false, false],
    ["Due", "2024-02-29", "2024-02-29"],
    ["At", "2026-11-21T11:15:00+01:00", "2026-11-21T10:15:00.000Z"],
    ["Status", "active", "Active"],
    ["Status", "Act%ive_", "Act%ive_"],
    ["Tags", ["a,b", "C"], ["a,b", "c"]],
    ["Tags", [], []],
    ["Email", " ada@example.com ", "ada@example.com"],
    ["Site", "https://example.com/x?y=1", "https://example.com/x?y=1"],
    ["Phone", "+1 (555) 010-0100 ext. 12", "+1 (555) 010-0100 ext. 12"],
    ["Meta", { a: [1, { b: null }] }, { a: [1, { b: null }] }],
    ["Meta", "text", "text"],
    ["Meta", 0, 0],
    ["Name", null, null],
  ];

  it.each(VALID)("takes %s = %j and stores %j", async (name, value, stored) => {
    const record = await create({ [name]: value });
    expect(byName(record.data)[name]).toEqual(stored);
    const [row] = await storedRows(h, table.tableId, [record.rowId]);
    // An empty value is stored as no value at all.
    expect(row!.data[table.id[name]!]).toEqual(stored === null ? undefined : stored);
  });

  const INVALID: Array<[string, JsonValue, string]> = [
    ["Name", 42, "must be a string"],
    ["Name", "x".repeat(51), "must be at most 50 characters"],
    ["Name", "nul\u0000", "must not contain NUL characters"],
    ["Notes", ["list"], "must be a string"],
    ["Age", "12abc", "must be a number"],
    ["Age", true, "must be a number"],
    ["Age", 1001, "must be at most 1000"],
    ["Age", -101, "must be at least -100"],
    ["Vip", "yes", "must be true or false"],
    ["Due", "2023-02-29", "must be a real calendar date (years 1-9999)"],
    ["Due", "21.11.2026", "must be a date string YYYY-MM-DD"],
    ["At", "2026-11-21 10:15", "must be an RFC 3339 date-time such as 2026-11-21T10:15:00Z"],
    ["At", "2026-11-21T10:15:00", "must be an RFC 3339 date-time such as 2026-11-21T10:15:00Z"],
    ["Status", "Nope", "is not a choice of this field"],
    ["Status", ["Active"], "must be a choice name (a string)"],
    ["Tags", "a", "must be an array of choice names"],
    ["Tags", ["a", "z"], "item 1 is not a choice of this field"],
    ["Email", "ada@", "must be an e-mail address such as ada@example.com"],
    ["Site", "javascript:alert(1)", "must be an absolute http or https URL"],
    ["Site", "ftp://example.com", "must be an absolute http or https URL"],
    [
      "Phone",
      "call me",
      "must be a phone number: digits, spaces, ( ) . - /, a leading + and an extension",
    ],
    ["Meta", { deep: "x".repeat(110_000) }, "must be at most 102400 bytes as JSON"],
    ["Doc", null, "is read-only"],
    ["Seq", 5, "is read-only"],
    ["Created", "2026-01-01T00:00:00Z", "is read-only"],
    ["Updated", null, "is read-only"],
  ];

  it.each(INVALID)("refuses a bad %s: %s, writing nothing", async (name, value, message) => {
    const before = await rowsIn(table.tableId);
    expect(await validationOf(create({ Name: "ok", [name]: value }))).toEqual([
      { key: name, message, source: "body", code: expect.any(String) },
    ]);
    expect(await rowsIn(table.tableId)).toEqual(before);
  });

  it("lists every bad key as it was sent, unknown fields and ids included", async () => {
    const before = await rowsIn(table.tableId);
    const issues = await validationOf(
      create({
        Nope: 1,
        "999999": 2,
        [table.id.Age!]: "x",
        age: 3,
        seq: 1,
        Name: "fine",
      }),
    );
    // JSON objects list integer-like keys first, in ascending order.
    expect(issues).toEqual([
      { key: table.id.Age, message: "must be a number", source: "body", code: "invalid_value" },
      { key: "999999", message: "is not a field of this table", source: "body", code: "not_found" },
      { key: "Nope", message: "is not a field of this table", source: "body", code: "not_found" },
      {
        key: "age",
        message: `names the same field as '${table.id.Age}'`,
        source: "body",
        code: "invalid_value",
      },
      { key: "seq", message: "is read-only", source: "body", code: "read_only" },
    ]);
    expect(await rowsIn(table.tableId)).toEqual(before);
  });

  it("requires required fields to be present and non-empty", async () => {
    expect(await validationOf(create({ Count: 1 }, strict.tableId))).toEqual([
      { key: "Title", message: "is required", source: "body", code: "required" },
      { key: "Tags", message: "is required", source: "body", code: "required" },
    ]);
    expect(await validationOf(create({ Title: "", Tags: [] }, strict.tableId))).toEqual([
      { key: "Title", message: "is required", source: "body", code: "required" },
      { key: "Tags", message: "is required", source: "body", code: "required" },
    ]);
    expect(await rowsIn(strict.tableId)).toEqual([]);
    const record = await create({ Title: "t", Tags: ["X"] }, strict.tableId);
    expect(byName(record.data, strict)).toEqual({ Title: "t", Tags: ["x"], Count: null });
  });

  it("refuses an unknown table, and a database the table is not in", async () => {
    expect(
      await reasonOf(h.records.createRecord({ tableId: 987654n, data: {} }, await as(t.editor))),
    ).toBe("table_not_found");
    expect(
      await reasonOf(
        h.records.createRecord(
          { tableId: table.tableId, databaseId: other.databaseId, data: {} },
          await as(t.editor),
        ),
      ),
    ).toBe("table_not_found");
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, databaseId: table.databaseId, data: { Name: "in db" } },
      await as(t.editor),
    );
    expect(byName(record!.data).Name).toBe("in db");
  });

  it("lets a form's principal create in its own table, and nothing else anywhere", async () => {
    const form = {
      kind: "form",
      formId: 77n,
      organizationId: t.organizationId,
      tableId: table.tableId,
    } as const;
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "from a form" } },
      await as(form),
    );
    expect(byName(record!.data).Name).toBe("from a form");
    const rowId = record!.rowId;
    const call = await as(form);
    for (const refused of [
      () => h.records.createRecord({ tableId: other.tableId, data: {} }, call),
      () => h.records.getRecord({ tableId: table.tableId, rowId }, call),
      () => h.records.updateRecord({ tableId: table.tableId, rowId, data: { Name: "x" } }, call),
      () => h.records.deleteRecord({ tableId: table.tableId, rowId }, call),
    ]) {
      expect(await reasonOf(refused())).toBe("table_not_found");
    }
  });
});

describe("reading a record", () => {
  let rowId: bigint;
  const markdown = [
    "# Hello <script>alert('x')</script>",
    "",
    "A [bad link](javascript:alert(1)) and a [good one](https://example.com).",
    "",
    '<img src=x onerror="alert(1)">',
  ].join("\n");

  beforeAll(async () => {
    rowId = (await create({ Name: "Reader", Notes: markdown, Status: "Done" })).rowId;
  });

  it("keys data by id by default and by name on request", async () => {
    const call = await as(t.viewer);
    const byId = await h.records.getRecord({ tableId: table.tableId, rowId }, call);
    expect(byId.record!.data![table.id.Name!]).toBe("Reader");
    const named = await h.records.getRecord(
      { tableId: table.tableId, rowId, responseFormat: ResponseFormat.NAMES },
      call,
    );
    expect(Object.keys(named.record!.data!)).toEqual(table.fields.map((f) => f.name));
    expect(named.record!.data).toMatchObject({ Name: "Reader", Status: "Done", Vip: null });
  });

  it("renders long text as Markdown, sanitised HTML or plain text", async () => {
    const call = await as(t.viewer);
    const get = async (richText: RichTextFormat) =>
      (
        await h.records.getRecord(
          { tableId: table.tableId, rowId, richText, fieldList: "Notes" },
          call,
        )
      ).record!.data![table.id.Notes!] as string;
    expect(await get(RichTextFormat.UNSPECIFIED)).toBe(markdown);
    expect(await get(RichTextFormat.MARKDOWN)).toBe(markdown);
    const html = await get(RichTextFormat.HTML);
    expect(html).toContain("<h1>");
    const tags = html.match(/<[^>]*>/g) ?? [];
    expect(tags.length).toBeGreaterThan(4);
    for (const tag of tags) {
      expect(tag).not.toMatch(/^<\/?(script|img)/i);
      expect(tag).not.toMatch(/\son\w+\s*=/i);
      expect(tag).not.toMatch(/javascript:/i);
    }
    // What was markup in the source is escaped text now.
    expect(html).toContain("&lt;script&gt;");
    expect(html).toContain("&lt;img src=x onerror=");
    expect(html).toContain('<a href="https://example.com" rel="noopener noreferrer">good one</a>');
    const plain = await get(RichTextFormat.PLAIN);
    // Text only: no markup is added, and raw HTML tags in the source are dropped.
    expect(plain).not.toMatch(/^#|<h1|<a |href=|<script|<img/m);
    expect(plain.split("\n\n")[0]).toBe("Hello");
    expect(plain).toContain("and a good one.");
  });

  it("shows only the selected fields, in the order asked, each once", async () => {
    const { record } = await h.records.getRecord(
      {
        tableId: table.tableId,
        rowId,
        responseFormat: ResponseFormat.NAMES,
        fieldList: `status,${table.id.Name},Status,row_id`,
      },
      await as(t.viewer),
    );
    expect(record!.data).toEqual({ Status: "Done", Name: "Reader" });
    expect(
      await validationOf(
        h.records.getRecord(
          { tableId: table.tableId, rowId, fieldList: "Name,Nope" },
          await as(t.viewer),
        ),
      ),
    ).toEqual([
      { key: "fields", message: "unknown field 'Nope' at 6", source: "query", code: "not_found" },
    ]);
  });

  it("refuses an unknown response format", async () => {
    expect(
      await validationOf(
        h.records.getRecord(
          { tableId: table.tableId, rowId, responseFormat: 7 as ResponseFormat },
          await as(t.viewer),
        ),
      ),
    ).toEqual([
      {
        key: "response_format",
        message: "must be ids or names",
        source: "query",
        code: "invalid_value",
      },
    ]);
  });

  it("answers record_not_found for a missing row or one of another table", async () => {
    const call = await as(t.viewer);
    const elsewhere = await create({ Title: "other" }, other.tableId);
    for (const id of [0n, 999999999n, elsewhere.rowId]) {
      const failure = await failureOf(
        h.records.getRecord({ tableId: table.tableId, rowId: id }, call),
      );
      expect(failure).toMatchObject({ code: Code.NotFound, reason: "record_not_found" });
    }
    expect(
      await reasonOf(
        h.records.getRecord({ tableId: table.tableId, rowId, databaseId: other.databaseId }, call),
      ),
    ).toBe("table_not_found");
  });
});

describe("updating a record", () => {
  it("changes only the named fields and stamps updated_at", async () => {
    const created = await create({ Name: "Before", Age: 1, Vip: true, Tags: ["a"] });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const { record } = await h.records.updateRecord(
      { tableId: table.tableId, rowId: created.rowId, data: { Age: 2, tags: null } },
      await as(t.editor),
    );
    const values = byName(record!.data);
    expect(values).toMatchObject({ Name: "Before", Age: 2, Vip: true, Tags: null });
    expect(values.Seq).toBe(byName(created.data).Seq);
    expect(values.Created).toBe(byName(created.data).Created);
    expect(
      record!.updatedAt!.seconds * 1000n + BigInt(record!.updatedAt!.nanos / 1e6),
    ).toBeGreaterThan(created.createdAt!.seconds * 1000n + BigInt(created.createdAt!.nanos / 1e6));
    const rows = await storedRows(h, table.tableId, [created.rowId]);
    expect(rows[0]!.data).toEqual({
      [table.id.Name!]: "Before",
      [table.id.Age!]: 2,
      [table.id.Vip!]: true,
      [table.id.Seq!]: values.Seq,
    });
  });

  it("leaves a record whose values do not change as it was", async () => {
    const created = await create({ Name: "Same" });
    const { record } = await h.records.updateRecord(
      { tableId: table.tableId, rowId: created.rowId, data: { Name: "Same" } },
      await as(t.editor),
    );
    expect(record!.updatedAt).toEqual(created.updatedAt);
  });

  it("refuses bad values, read-only fields and clearing a required field, changing nothing", async () => {
    const created = await create({ Title: "keep", Tags: ["x"], Count: 1 }, strict.tableId);
    const before = await rowsIn(strict.tableId);
    const call = await as(t.editor);
    expect(
      await validationOf(
        h.records.updateRecord(
          {
            tableId: strict.tableId,
            rowId: created.rowId,
            data: { Count: "x", Title: null, Tags: [] },
          },
          call,
        ),
      ),
    ).toEqual([
      { key: "Count", message: "must be a number", source: "body", code: "invalid_value" },
      {
        key: "Title",
        message: "is required and cannot be cleared",
        source: "body",
        code: "required",
      },
      {
        key: "Tags",
        message: "is required and cannot be cleared",
        source: "body",
        code: "required",
      },
    ]);
    expect(await rowsIn(strict.tableId)).toEqual(before);
  });

  it("answers record_not_found for a row of another table", async () => {
    const elsewhere = await create({ Title: "other" }, other.tableId);
    expect(
      await reasonOf(
        h.records.updateRecord(
          { tableId: table.tableId, rowId: elsewhere.rowId, data: { Name: "x" } },
          await as(t.editor),
        ),
      ),
    ).toBe("record_not_found");
    expect((await rowsIn(other.tableId)).some((d) => d[other.id.Title!] === "other")).toBe(true);
  });
});

describe("deleting a record", () => {
  it("deletes it once; a second delete is record_not_found", async () => {
    const created = await create({ Name: "Doomed" });
    const call = await as(t.editor);
    const usage = async () =>
      (await h.records.getRecordUsage({ organizationId: t.organizationId }, await as(SERVICE)))
        .records;
    const before = await usage();
    expect(
      await h.records.deleteRecord({ tableId: table.tableId, rowId: created.rowId }, call),
    ).toMatchObject({ deletedId: created.rowId });
    expect(await usage()).toBe(before - 1n);
    expect(
      await reasonOf(h.records.getRecord({ tableId: table.tableId, rowId: created.rowId }, call)),
    ).toBe("record_not_found");
    expect(
      await reasonOf(
        h.records.deleteRecord({ tableId: table.tableId, rowId: created.rowId }, call),
      ),
    ).toBe("record_not_found");
  });
});

describe("batches", () => {
  let batchTable: TestTable;

  beforeEach(async () => {
    batchTable = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("Age", FieldType.NUMBER),
      def("Seq", FieldType.AUTONUMBER),
    ]);
  });

  it("creates records in request order, all of them", async () => {
    const { records } = await h.records.batchCreateRecords(
      {
        tableId: batchTable.tableId,
        records: [{ data: { Name: "a" } }, { data: { Name: "b" } }, { data: { Age: 3 } }],
      },
      await as(t.editor),
    );
    expect(records.map((r) => byName(r.data, batchTable))).toEqual([
      { Name: "a", Age: null, Seq: 1 },
      { Name: "b", Age: null, Seq: 2 },
      { Name: null, Age: 3, Seq: 3 },
    ]);
    expect(records[0]!.rowId < records[1]!.rowId && records[1]!.rowId < records[2]!.rowId).toBe(
      true,
    );
  });

  it("creates none when one record is bad, naming each bad key by its place", async () => {
    const issues = await validationOf(
      h.records.batchCreateRecords(
        {
          tableId: batchTable.tableId,
          records: [
            { data: { Name: "fine" } },
            { data: { Age: "x" } },
            { data: { Nope: 1, Seq: 2 } },
          ],
        },
        await as(t.editor),
      ),
    );
    expect(issues).toEqual([
      {
        key: "records.1.data.Age",
        message: "must be a number",
        source: "body",
        code: "invalid_value",
      },
      {
        key: "records.2.data.Nope",
        message: "is not a field of this table",
        source: "body",
        code: "not_found",
      },
      { key: "records.2.data.Seq", message: "is read-only", source: "body", code: "read_only" },
    ]);
    expect(await rowsIn(batchTable.tableId)).toEqual([]);
  });

  it("takes 1-1000 records", async () => {
    const call = await as(t.editor);
    expect(
      await validationOf(
        h.records.batchCreateRecords({ tableId: batchTable.tableId, records: [] }, call),
      ),
    ).toEqual([
      {
        key: "records",
        message: "must hold 1-1000 records",
        source: "body",
        code: "out_of_range",
      },
    ]);
    const many = Array.from({ length: 1001 }, () => ({ data: {} }));
    expect(
      await validationOf(
        h.records.batchCreateRecords({ tableId: batchTable.tableId, records: many }, call),
      ),
    ).toEqual([
      {
        key: "records",
        message: "must hold 1-1000 records",
        source: "body",
        code: "out_of_range",
      },
    ]);
    const { records } = await h.records.batchCreateRecords(
      { tableId: batchTable.tableId, records: many.slice(1).map((_, i) => ({ data: { Age: i } })) },
      call,
    );
    expect(records).toHaveLength(1000);
    expect(byName(records[999]!.data, batchTable)).toEqual({ Name: null, Age: 999, Seq: 1000 });
    // The answer is not read back from the database: each record's data must be its row's.
    const rows = await storedRows(
      h,
      batchTable.tableId,
      records.map((r) => r.rowId),
    );
    const stored = new Map(rows.map((r) => [r.row_id, r.data]));
    for (const record of records) {
      const fields = byName(record.data, batchTable);
      expect(stored.get(record.rowId.toString())).toEqual({
        [batchTable.id.Age!]: fields.Age,
        [batchTable.id.Seq!]: fields.Seq,
      });
    }
  });

  it("updates all or none, each row of this table", async () => {
    const call = await as(t.editor);
    const { records } = await h.records.batchCreateRecords(
      { tableId: batchTable.tableId, records: [{ data: { Name: "a" } }, { data: { Name: "b" } }] },
      call,
    );
    const [a, b] = records as [(typeof records)[0], (typeof records)[0]];
    const before = await rowsIn(batchTable.tableId);
    const elsewhere = await create({ Title: "other" }, other.tableId);
    expect(
      await reasonOf(
        h.records.batchUpdateRecords(
          {
            tableId: batchTable.tableId,
            records: [
              { rowId: a.rowId, data: { Name: "A" } },
              { rowId: elsewhere.rowId, data: { Name: "B" } },
            ],
          },
          call,
        ),
      ),
    ).toBe("record_not_found");
    expect(
      await validationOf(
        h.records.batchUpdateRecords(
          {
            tableId: batchTable.tableId,
            records: [
              { rowId: a.rowId, data: { Name: "A" } },
              { rowId: b.rowId, data: { Age: "x" } },
              { rowId: a.rowId, data: { Age: 1 } },
            ],
          },
          call,
        ),
      ),
    ).toEqual([
      {
        key: "records.1.data.Age",
        message: "must be a number",
        source: "body",
        code: "invalid_value",
      },
      {
        key: "records.2.row_id",
        message: "appears more than once (first at records.0)",
        source: "body",
        code: "invalid_value",
      },
    ]);
    expect(await rowsIn(batchTable.tableId)).toEqual(before);

    const updated = await h.records.batchUpdateRecords(
      {
        tableId: batchTable.tableId,
        records: [
          { rowId: b.rowId, data: { Age: 2 } },
          { rowId: a.rowId, data: { Name: "A" } },
        ],
      },
      call,
    );
    expect(updated.records.map((r) => byName(r.data, batchTable))).toEqual([
      { Name: "b", Age: 2, Seq: 2 },
      { Name: "A", Age: null, Seq: 1 },
    ]);
    // Each row got its own data, as the answer says.
    const { Name, Age, Seq } = batchTable.id as Record<string, string>;
    expect(await rowsIn(batchTable.tableId)).toEqual([
      { [Name!]: "A", [Seq!]: 1 },
      { [Name!]: "b", [Age!]: 2, [Seq!]: 2 },
    ]);
  });

  it("deletes all or none: an unknown id deletes nothing", async () => {
    const call = await as(t.editor);
    const { records } = await h.records.batchCreateRecords(
      { tableId: batchTable.tableId, records: [{ data: {} }, { data: {} }, { data: {} }] },
      call,
    );
    const ids = records.map((r) => r.rowId);
    const failure = await failureOf(
      h.records.batchDeleteRecords(
        { tableId: batchTable.tableId, rowIds: [ids[0]!, 999999999n] },
        call,
      ),
    );
    expect(failure).toMatchObject({ code: Code.NotFound, reason: "record_not_found" });
    expect(await rowsIn(batchTable.tableId)).toHaveLength(3);
    expect(
      await validationOf(
        h.records.batchDeleteRecords({ tableId: batchTable.tableId, rowIds: [] }, call),
      ),
    ).toEqual([
      { key: "row_ids", message: "must hold 1-1000 ids", source: "body", code: "out_of_range" },
    ]);
    const deleted = await h.records.batchDeleteRecords(
      { tableId: batchTable.tableId, rowIds: [ids[2]!, ids[0]!, ids[2]!] },
      call,
    );
    expect(deleted.deletedIds).toEqual([ids[2], ids[0]]);
    expect(await rowsIn(batchTable.tableId)).toHaveLength(1);
  });
});

describe("who may do what", () => {
  it("lets a viewer read but not write", async () => {
    const row = await create({ Name: "viewed" });
    const call = await as(t.viewer);
    await h.records.getRecord({ tableId: table.tableId, rowId: row.rowId }, call);
    await h.records.listRecords({ tableId: table.tableId }, call);
    const failure = await failureOf(
      h.records.createRecord({ tableId: table.tableId, data: {} }, call),
    );
    expect(failure).toMatchObject({
      code: Code.PermissionDenied,
      reason: "organization_forbidden",
    });
  });

  it("lets a read token read and refuses it every write with token_read_only", async () => {
    const row = await create({ Name: "tokened" });
    const read = await as(token(t.organizationId, "read"));
    await h.records.getRecord({ tableId: table.tableId, rowId: row.rowId }, read);
    await h.records.listRecords({ tableId: table.tableId }, read);
    await h.records.getRecordSchema({ tableId: table.tableId }, read);
    const before = await rowsIn(table.tableId);
    const writes = [
      h.records.createRecord({ tableId: table.tableId, data: { Name: "x" } }, read),
      h.records.updateRecord(
        { tableId: table.tableId, rowId: row.rowId, data: { Name: "x" } },
        read,
      ),
      h.records.deleteRecord({ tableId: table.tableId, rowId: row.rowId }, read),
      h.records.batchCreateRecords({ tableId: table.tableId, records: [{ data: {} }] }, read),
      h.records.batchUpdateRecords(
        { tableId: table.tableId, records: [{ rowId: row.rowId, data: {} }] },
        read,
      ),
      h.records.batchDeleteRecords({ tableId: table.tableId, rowIds: [row.rowId] }, read),
    ];
    for (const write of writes) {
      expect(await failureOf(write)).toMatchObject({
        code: Code.PermissionDenied,
        reason: "token_read_only",
      });
    }
    expect(await rowsIn(table.tableId)).toEqual(before);
  });

  it("lets a read_write token write, and names it as the actor", async () => {
    const principal = token(t.organizationId, "read_write");
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "by token" } },
      await as(principal),
    );
    const rows = await storedRows(h, table.tableId, [record!.rowId]);
    expect(rows[0]!.created_by).toBe(`api_token:${(principal as { tokenId: bigint }).tokenId}`);
  });

  it("answers 404 to another organization's token or member, whatever the call", async () => {
    const row = await create({ Name: "private" });
    for (const who of [
      await as(token(t.outsiderOrganizationId, "read_write")),
      await as(t.outsider),
    ]) {
      // One at a time: a call made up front could fail before its turn comes, unhandled.
      const calls = [
        () => h.records.getRecord({ tableId: table.tableId, rowId: row.rowId }, who),
        () => h.records.listRecords({ tableId: table.tableId }, who),
        () => h.records.createRecord({ tableId: table.tableId, data: {} }, who),
        () => h.records.updateRecord({ tableId: table.tableId, rowId: row.rowId, data: {} }, who),
        () => h.records.deleteRecord({ tableId: table.tableId, rowId: row.rowId }, who),
        () => h.records.batchDeleteRecords({ tableId: table.tableId, rowIds: [row.rowId] }, who),
        () => h.records.getRecordSchema({ tableId: table.tableId }, who),
      ];
      for (const call of calls) {
        expect(await failureOf(call())).toMatchObject({
          code: Code.NotFound,
          reason: "table_not_found",
        });
      }
    }
    // The outsider's own table does not reach our rows either.
    const theirs = await createTable(h, t.outsider, t.outsiderOrganizationId, [
      def("Title", FieldType.TEXT),
    ]);
    expect(
      await reasonOf(
        h.records.getRecord({ tableId: theirs.tableId, rowId: row.rowId }, await as(t.outsider)),
      ),
    ).toBe("record_not_found");
  });

  it("refuses a call without a principal", async () => {
    const failure = await failureOf(h.records.listRecords({ tableId: table.tableId }));
    expect(failure).toMatchObject({ code: Code.Unauthenticated, reason: "unauthorized" });
  });
});

describe("internal calls", () => {
  it("resolves a record to its table and organization, for services only", async () => {
    const row = await create({ Name: "resolved" });
    expect(await h.records.resolveRecord({ rowId: row.rowId }, await as(SERVICE))).toMatchObject({
      tableId: table.tableId,
      organizationId: t.organizationId,
    });
    expect(await reasonOf(h.records.resolveRecord({ rowId: 999999999n }, await as(SERVICE)))).toBe(
      "record_not_found",
    );
    expect(
      await failureOf(h.records.resolveRecord({ rowId: row.rowId }, await as(t.owner))),
    ).toMatchObject({
      code: Code.PermissionDenied,
      reason: "internal_only",
    });
  });

  it("counts an organization's records, as organization's limits show them", async () => {
    const { records } = await h.records.getRecordUsage(
      { organizationId: t.organizationId },
      await as(SERVICE),
    );
    const { rows } = await h.db.query(
      `select coalesce(sum(delta), 0)::int as n from records.record_count
       where table_id in (select table_id from records.user_table where organization_id = $1)`,
      [t.organizationId.toString()],
    );
    expect(records).toBe(BigInt(rows[0].n));
    const limits = await h.org.getLimits({ organizationId: t.organizationId }, await as(t.viewer));
    expect(limits.usage!.records).toBe(records);
    expect(
      await reasonOf(
        h.records.getRecordUsage({ organizationId: t.organizationId }, await as(t.owner)),
      ),
    ).toBe("internal_only");
  });
});

describe("the table's record schema", () => {
  it("gives the table's fields and the JSON Schemas of a record's data, and nothing of HTTP", async () => {
    const { schema } = await h.records.getRecordSchema(
      { tableId: table.tableId, databaseId: table.databaseId },
      await as(t.viewer),
    );
    expect(schema!.tableName).toBe("Things");
    expect(schema!.fields.map((f) => [f.name, f.fieldId.toString(), f.type, f.sortable])).toEqual(
      table.fields.map((f) => [
        f.name,
        f.fieldId.toString(),
        f.type,
        // json and file values have no order: a list cannot sort by them.
        f.type !== FieldType.JSON && f.type !== FieldType.FILE,
      ]),
    );
    type Data = { properties: Record<string, JsonObject>; required?: string[] };
    const byName = schema!.readByName as unknown as Data;
    expect(Object.keys(byName.properties)).toEqual(table.fields.map((f) => f.name));
    expect(byName.properties.Age).toMatchObject({
      type: ["number", "null"],
      minimum: -100,
      maximum: 1000,
    });
    expect(byName.properties.Status).toMatchObject({ enum: ["Active", "Done", "Act%ive_", null] });
    expect(byName.properties.Seq).toMatchObject({ type: ["integer", "null"], readOnly: true });
    expect(byName.properties.Created).toMatchObject({ format: "date-time", readOnly: true });
    expect(byName.properties.Doc).toMatchObject({ readOnly: true });
    const byId = schema!.readById as unknown as Data;
    expect(byId.properties[table.id.Name!]).toMatchObject({ title: "Name", maxLength: 50 });
    // A read that names `fields` holds only those: no key is required.
    expect(byId.required).toBeUndefined();
    expect(byName.required).toBeUndefined();
    for (const written of [schema!.createByName, schema!.updateByName]) {
      const keys = Object.keys((written as unknown as Data).properties);
      expect(keys).not.toContain("Seq");
      expect(keys).toContain("Tags");
    }
    expect(Object.keys((schema!.createById as unknown as Data).properties)).toContain(
      table.id.Tags,
    );
    // Statuses, paths and envelopes are the gateway's: none of them is described here.
    const { readById, readByName, createByName, createById, updateByName, updateById } = schema!;
    expect(
      JSON.stringify([readById, readByName, createByName, createById, updateByName, updateById]),
    ).not.toMatch(/"(paths|responses|\$ref)"|Retry-After|\b4\d\d on `/);
  });

  it("says which fields a create must fill, by name and by id", async () => {
    const { schema } = await h.records.getRecordSchema(
      { tableId: strict.tableId },
      await as(t.viewer),
    );
    expect((schema!.createByName as { required?: string[] }).required).toEqual(["Title", "Tags"]);
    expect((schema!.createById as { required?: string[] }).required).toEqual([
      strict.id.Title,
      strict.id.Tags,
    ]);
    expect((schema!.updateByName as { required?: string[] }).required).toBeUndefined();
  });

  it("is table_not_found outside the table's database", async () => {
    expect(
      await reasonOf(
        h.records.getRecordSchema(
          { tableId: table.tableId, databaseId: other.databaseId },
          await as(t.viewer),
        ),
      ),
    ).toBe("table_not_found");
  });
});
