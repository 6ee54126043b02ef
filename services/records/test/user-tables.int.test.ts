import type { JsonValue } from "@bufbuild/protobuf";
import { query } from "@rowbase/kit";
import type { FieldTypeName } from "@rowbase/kit/field-types";
import { sessionIn } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  columnParam,
  columnRead,
  columnTypeOf,
  columnValue,
  type StoredField,
} from "../src/db/user-tables/columns.js";
import {
  addFieldSql,
  applyDdl,
  createTableSql,
  dropFieldSql,
  dropOrganizationSchemaSql,
  dropTableSql,
} from "../src/db/user-tables/ddl.js";
import { fieldColumn, tableWriteLockKey, userTable } from "../src/db/user-tables/names.js";
import { changeUserTableField, undoFieldChange } from "../src/db/user-tables/schema-changes.js";
import { changeFieldType, type FieldTypeChange } from "../src/db/user-tables/type-change.js";
import { keepChoicesSql, numberRowsSql } from "../src/db/user-tables/value-changes.js";
import { type createRecordsOrm, SCHEMA } from "../src/service.js";
import { openRecordsDatabase } from "./database.js";

// The per-table storage's DDL and value encoding against a real PostgreSQL: every field type's
// column holds what the registry stores and reads it back as it was written, schema changes
// touch only what they name, and a DDL statement waiting for a lock never holds reads up for
// longer than its lock timeout.

let url: string;
let close: () => Promise<void>;
let orm: Awaited<ReturnType<typeof createRecordsOrm>>;

beforeAll(async () => {
  ({ url, orm, close } = await openRecordsDatabase());
});

afterAll(() => close?.());

const CHOICES = {
  choices: [
    { id: "ch_a", name: "Alpha" },
    { id: "ch_b", name: "Beta, with a comma" },
    { id: "ch_c", name: "Gamma" },
  ],
};

let nextFieldId = 100n;
function field(type: FieldTypeName, options?: StoredField["options"]): StoredField {
  nextFieldId += 1n;
  return options ? { id: nextFieldId, type, options } : { id: nextFieldId, type };
}

const run = (sql: string, params: unknown[] = []) =>
  query<Record<string, unknown>>(orm.em.fork(), sql, params);

async function columnsOf(organizationId: bigint, tableId: bigint): Promise<Record<string, string>> {
  const rows = await run(
    `select column_name, data_type from information_schema.columns
     where table_schema = $1 and table_name = $2 order by ordinal_position`,
    [`org_${organizationId}`, `t_${tableId}`],
  );
  return Object.fromEntries(rows.map((row) => [row.column_name, row.data_type]));
}

/** Inserts one row of `values` (by field) and reads it back through the fields' columns. */
async function roundTrip(
  organizationId: bigint,
  tableId: bigint,
  rowId: bigint,
  values: ReadonlyMap<StoredField, JsonValue>,
): Promise<Map<StoredField, JsonValue>> {
  const stored = [...values].filter(([f]) => columnTypeOf(f.type) !== undefined);
  const columns = stored.map(([f]) => fieldColumn(f.id));
  const placeholders = stored.map(([f], i) => `$${i + 2}${f.type === "json" ? "::jsonb" : ""}`);
  await run(
    `insert into ${userTable(organizationId, tableId)}
       (row_id, created_by, updated_by${columns.map((c) => `, ${c}`).join("")})
     values ($1, 'system', 'system'${placeholders.map((p) => `, ${p}`).join("")})`,
    [rowId, ...stored.map(([f, value]) => columnParam(f, value))],
  );
  const reads = stored.map(
    ([f], i) => `${columnRead(columnTypeOf(f.type)!, fieldColumn(f.id))} as c${i}`,
  );
  const [row] = await run(
    `select ${reads.join(", ")} from ${userTable(organizationId, tableId)} where row_id = $1`,
    [rowId],
  );
  return new Map(stored.map(([f], i) => [f, columnValue(f, row![`c${i}`])]));
}

describe("a user table", () => {
  const organizationId = 7n;
  const tableId = 70n;
  const text = field("text");
  const long = field("long_text");
  const email = field("email");
  const link = field("url");
  const phone = field("phone");
  const amount = field("number", { decimals: 4 });
  const done = field("boolean");
  const due = field("date");
  const at = field("datetime");
  const status = field("single_select", CHOICES);
  const tags = field("multi_select", CHOICES);
  const doc = field("json");
  const serial = field("autonumber");
  const file = field("file");
  const created = field("created_at");
  const updated = field("updated_at");
  const fields = [
    text,
    long,
    email,
    link,
    phone,
    amount,
    done,
    due,
    at,
    status,
    tags,
    doc,
    serial,
    file,
    created,
    updated,
  ];

  beforeAll(async () => {
    await applyDdl(orm.em.fork(), createTableSql(organizationId, tableId, fields));
  });

  it("has the fixed columns and a column of its natural type per field that has one", async () => {
    expect(await columnsOf(organizationId, tableId)).toEqual({
      row_id: "bigint",
      version: "bigint",
      created_at: "timestamp with time zone",
      updated_at: "timestamp with time zone",
      created_by: "text",
      updated_by: "text",
      [fieldColumn(text.id)]: "text",
      [fieldColumn(long.id)]: "text",
      [fieldColumn(email.id)]: "text",
      [fieldColumn(link.id)]: "text",
      [fieldColumn(phone.id)]: "text",
      [fieldColumn(amount.id)]: "numeric",
      [fieldColumn(done.id)]: "boolean",
      [fieldColumn(due.id)]: "date",
      [fieldColumn(at.id)]: "timestamp with time zone",
      [fieldColumn(status.id)]: "text",
      [fieldColumn(tags.id)]: "ARRAY",
      [fieldColumn(doc.id)]: "jsonb",
      [fieldColumn(serial.id)]: "bigint",
    });
    const indexes = await run("select indexname from pg_indexes where schemaname = $1", [
      `org_${organizationId}`,
    ]);
    expect(indexes.map((row) => row.indexname).sort()).toEqual([
      `t_${tableId}_created`,
      `t_${tableId}_pkey`,
      `t_${tableId}_updated`,
    ]);
  });

  it("reads every value back as the registry stored it", async () => {
    const values = new Map<StoredField, JsonValue>([
      [text, "Ada ' \" ; drop table x; --"],
      [long, "# Title\n\nsome *markdown*"],
      [email, "ada@example.com"],
      [link, "https://example.com/a?b=c"],
      [phone, "+44 20 7946 0000"],
      [amount, 1234.5678],
      [done, false],
      [due, "2026-02-28"],
      [at, "2026-11-21T10:15:00.123Z"],
      [status, "Beta, with a comma"],
      [tags, ["Gamma", "Alpha"]],
      [doc, { nested: [1, "two", { three: null }], unicode: "ü€😀" }],
      [serial, 42],
    ]);
    expect(await roundTrip(organizationId, tableId, 1n, values)).toEqual(values);
    const empty = new Map<StoredField, JsonValue>([...values.keys()].map((f) => [f, null]));
    expect(await roundTrip(organizationId, tableId, 2n, empty)).toEqual(empty);
  });

  it("notes each insert's row ids as ranges of consecutive ids, and counts its rows", async () => {
    const ranges = async () =>
      (
        await run(
          "select lower(ids)::text as first, (upper(ids) - 1)::text as last from row_range where table_id = $1 order by ids",
          [tableId],
        )
      ).map((row) => `${row.first}-${row.last}`);
    const count = async () =>
      Number(
        (
          await run(
            "select coalesce(sum(delta), 0)::text as n from record_count where table_id = $1",
            [tableId],
          )
        )[0]!.n,
      );
    const before = await ranges();
    const counted = await count();
    const insert = (ids: number[]) =>
      run(
        `insert into ${userTable(organizationId, tableId)} (row_id, created_by, updated_by)
         select id, 'system', 'system' from unnest($1::bigint[]) as id`,
        [ids],
      );
    await insert([9001, 9002, 9003]);
    await insert([9010]);
    await insert([9024, 9020, 9021, 9030, 9022]);
    await insert([]);
    expect((await ranges()).filter((range) => !before.includes(range))).toEqual([
      "9001-9003",
      "9010-9010",
      "9020-9022",
      "9024-9024",
      "9030-9030",
    ]);
    expect((await count()) - counted).toBe(9);
  });

  it("keeps choice ids, not names, so a renamed choice needs no rewrite", async () => {
    const [row] = await run(
      `select ${fieldColumn(status.id)} as one, ${fieldColumn(tags.id)} as many
       from ${userTable(organizationId, tableId)} where row_id = 1`,
    );
    expect(row).toEqual({ one: "ch_b", many: ["ch_c", "ch_a"] });
    const renamed: StoredField = {
      ...status,
      options: { choices: [{ id: "ch_b", name: "Bravo" }] },
    };
    expect(columnValue(renamed, row!.one)).toBe("Bravo");
    // A choice removed from the field reads as no value.
    expect(columnValue(renamed, "ch_a")).toBeNull();
    expect(columnValue({ ...tags, options: renamed.options }, row!.many)).toEqual([]);
  });

  it("reads dates and datetimes in their stored forms whatever the session's settings", async () => {
    const session = await sessionIn(url, SCHEMA);
    try {
      await session.query("set timezone = 'Asia/Kolkata'");
      await session.query("set datestyle = 'SQL, DMY'");
      const { rows } = await session.query(
        `select ${columnRead("date", fieldColumn(due.id))} as day,
                ${columnRead("timestamptz", fieldColumn(at.id))} as instant
         from ${userTable(organizationId, tableId)} where row_id = 1`,
      );
      expect(rows[0]).toEqual({ day: "2026-02-28", instant: "2026-11-21T10:15:00.123Z" });
    } finally {
      await session.end();
    }
  });
});

describe("schema changes of a user table", () => {
  const organizationId = 8n;
  const tableId = 80n;
  const name = field("text");
  const size = field("number");

  beforeAll(async () => {
    await applyDdl(orm.em.fork(), createTableSql(organizationId, tableId, [name]));
    await run(
      `insert into ${userTable(organizationId, tableId)} (row_id, created_by, updated_by, ${fieldColumn(name.id)})
       values (1, 'system', 'system', 'kept')`,
    );
  });

  it("adds and drops a field's column and leaves the rows' other values as they were", async () => {
    await applyDdl(orm.em.fork(), addFieldSql(organizationId, tableId, size));
    expect(await columnsOf(organizationId, tableId)).toMatchObject({
      [fieldColumn(size.id)]: "numeric",
    });
    // Applied again (a retried or repaired change), nothing more happens.
    await applyDdl(orm.em.fork(), addFieldSql(organizationId, tableId, size));
    await applyDdl(orm.em.fork(), dropFieldSql(organizationId, tableId, size.id));
    await applyDdl(orm.em.fork(), dropFieldSql(organizationId, tableId, size.id));
    const columns = await columnsOf(organizationId, tableId);
    expect(columns).not.toHaveProperty(fieldColumn(size.id));
    expect(columns).toHaveProperty(fieldColumn(name.id));
    const rows = await run(
      `select row_id::int, ${fieldColumn(name.id)} as name from ${userTable(organizationId, tableId)}`,
    );
    expect(rows).toEqual([{ row_id: 1, name: "kept" }]);
  });

  it("needs nothing for a field without a column of its own", () => {
    for (const type of ["file", "created_at", "updated_at"] as const) {
      expect(addFieldSql(organizationId, tableId, field(type))).toEqual([]);
    }
  });

  it("gives up on a lock a long read holds, changing nothing, and never holds reads up past its timeout", async () => {
    const reader = await sessionIn(url, SCHEMA);
    const later = await sessionIn(url, SCHEMA);
    try {
      await reader.query("begin");
      await reader.query(`select count(*) from ${userTable(organizationId, tableId)}`);
      const change = applyDdl(orm.em.fork(), addFieldSql(organizationId, tableId, size), {
        lockTimeoutMs: 300,
        attempts: 2,
      });
      // A read that comes while the change waits is served once the change's attempt gives up.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = Date.now();
      const read = await later.query(
        `select count(*)::int as n from ${userTable(organizationId, tableId)}`,
      );
      expect(read.rows).toEqual([{ n: 1 }]);
      expect(Date.now() - started).toBeLessThan(5_000);
      await expect(change).rejects.toMatchObject({ code: "55P03" });
      expect(await columnsOf(organizationId, tableId)).not.toHaveProperty(fieldColumn(size.id));
    } finally {
      await reader.query("rollback");
      await reader.end();
      await later.end();
    }
    // Once the read has ended, the same change goes through.
    await applyDdl(orm.em.fork(), addFieldSql(organizationId, tableId, size));
    expect(await columnsOf(organizationId, tableId)).toHaveProperty(fieldColumn(size.id));
  });

  it("drops a table, then an organization's schema with every table in it", async () => {
    const other = 81n;
    await applyDdl(orm.em.fork(), createTableSql(organizationId, other, [name]));
    await applyDdl(orm.em.fork(), dropTableSql(organizationId, other));
    const tables = async () =>
      (
        await run("select tablename from pg_tables where schemaname = $1 order by tablename", [
          `org_${organizationId}`,
        ])
      ).map((row) => row.tablename);
    expect(await tables()).toEqual([`t_${tableId}`]);
    await applyDdl(orm.em.fork(), dropOrganizationSchemaSql(organizationId));
    expect(await tables()).toEqual([]);
    const schemas = await run("select 1 from pg_namespace where nspname = $1", [
      `org_${organizationId}`,
    ]);
    expect(schemas).toEqual([]);
    // Dropping what is gone already is no error: a repaired deletion ends the same way.
    await applyDdl(orm.em.fork(), [
      ...dropTableSql(organizationId, tableId),
      ...dropOrganizationSchemaSql(organizationId),
    ]);
  });
});

describe("a field's type change", () => {
  const organizationId = 9n;
  let nextTable = 90n;

  /** A fresh table of one field holding `values` in rows 1, 2, ... (null: no value). */
  async function tableOf(f: StoredField, values: readonly JsonValue[]): Promise<bigint> {
    nextTable += 1n;
    const tableId = nextTable;
    await applyDdl(orm.em.fork(), createTableSql(organizationId, tableId, [f]));
    for (const [i, value] of values.entries()) {
      await roundTrip(organizationId, tableId, BigInt(i + 1), new Map([[f, value]]));
    }
    return tableId;
  }

  /** The field's values in row order, read through its column as `f` describes it. */
  async function valuesOf(tableId: bigint, f: StoredField): Promise<JsonValue[]> {
    const rows = await run(
      `select ${columnRead(columnTypeOf(f.type)!, fieldColumn(f.id))} as v
       from ${userTable(organizationId, tableId)} order by row_id`,
    );
    return rows.map((row) => columnValue(f, row.v));
  }

  const change = (
    tableId: bigint,
    from: StoredField,
    to: Omit<StoredField, "id">,
    required: FieldTypeChange["required"] = "none",
  ): FieldTypeChange => ({ organizationId, tableId, from, to: { ...to, id: from.id }, required });

  it("converts text to numbers in a column of the new type, leaving no shadow column", async () => {
    const f = field("text");
    const tableId = await tableOf(f, ["42", " 7.25 ", "", null, "-0.5"]);
    const to = { type: "number" as const, options: { decimals: 1 } };
    const done = await changeFieldType(orm.em.fork(), change(tableId, f, to), { chunk: 2 });
    expect(done).toEqual({ converted: 3 });
    const columns = await columnsOf(organizationId, tableId);
    expect(columns[fieldColumn(f.id)]).toBe("numeric");
    expect(Object.keys(columns).filter((c) => c.endsWith("_next"))).toEqual([]);
    expect(await valuesOf(tableId, { ...to, id: f.id })).toEqual([42, 7.3, null, null, -0.5]);
  });

  it("reaches every row of a table of more chunks than one, in row id order", async () => {
    // Rows 1-25 hold their own number as text: read in the text's order ("10" before "9"), a
    // chunk would end past rows it never read.
    const f = field("text");
    const texts = Array.from({ length: 25 }, (_, i) => String(i + 1));
    const to = { type: "number" as const, options: {} };
    for (const keepPrevious of [false, true]) {
      const tableId = await tableOf(f, texts);
      expect(
        await changeFieldType(orm.em.fork(), change(tableId, f, to), { chunk: 4, keepPrevious }),
      ).toEqual({ converted: 25 });
      expect(await valuesOf(tableId, { ...to, id: f.id })).toEqual(texts.map(Number));
    }
  });

  it("rolls back whole when its caller gives up (the signal aborts) between chunks", async () => {
    const f = field("text");
    const texts = Array.from({ length: 12 }, (_, i) => String(i + 1));
    const tableId = await tableOf(f, texts);
    const caller = new AbortController();
    const changing = changeUserTableField(
      orm.em.fork(),
      { organizationId, tableId },
      { from: f, to: { id: f.id, type: "number", options: {} }, required: "none" },
      "given-up",
      { chunk: 4, signal: caller.signal, afterChunk: async () => caller.abort() },
    );
    await expect(changing).rejects.toThrow();
    expect((await columnsOf(organizationId, tableId))[fieldColumn(f.id)]).toBe("text");
    expect(await valuesOf(tableId, f)).toEqual(texts);
    expect(await run("select 1 from kept_column where change_id = 'given-up'")).toEqual([]);
  });

  it("is taken back by a release that came while it converted, once it has committed", async () => {
    const f = field("text");
    const texts = Array.from({ length: 12 }, (_, i) => String(i + 1));
    const tableId = await tableOf(f, texts);
    let converting!: () => void;
    const started = new Promise<void>((resolve) => {
      converting = resolve;
    });
    let finish!: () => void;
    const held = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const changing = changeUserTableField(
      orm.em.fork(),
      { organizationId, tableId },
      { from: f, to: { id: f.id, type: "number", options: {} }, required: "none" },
      "released-early",
      {
        chunk: 4,
        afterChunk: async () => {
          converting();
          await held;
        },
      },
    );
    await started;
    // Catalog gave up and released the change before records committed it.
    let undone = false;
    const undoing = undoFieldChange(orm.em.fork(), tableId, "released-early").then(() => {
      undone = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(undone).toBe(false);
    finish();
    await changing;
    await undoing;
    expect((await columnsOf(organizationId, tableId))[fieldColumn(f.id)]).toBe("text");
    expect(await valuesOf(tableId, f)).toEqual(texts);
    expect(await run("select 1 from kept_column where change_id = 'released-early'")).toEqual([]);
  });

  it("refuses a change some value cannot take, naming the rows, and changes nothing", async () => {
    const f = field("text");
    const tableId = await tableOf(f, ["1", "one", "2", "two", "3"]);
    const done = await changeFieldType(
      orm.em.fork(),
      change(tableId, f, { type: "number", options: {} }),
      { chunk: 2 },
    );
    expect(done).toEqual({
      refused: { rowIds: [2n, 4n], count: 2, message: expect.stringMatching(/^record 2: /) },
    });
    const columns = await columnsOf(organizationId, tableId);
    expect(columns[fieldColumn(f.id)]).toBe("text");
    expect(Object.keys(columns).filter((c) => c.endsWith("_next"))).toEqual([]);
    expect(await valuesOf(tableId, f)).toEqual(["1", "one", "2", "two", "3"]);
  });

  it("leaves to Node the values SQL cannot judge, its refusals counted in row order", async () => {
    const f = field("text");
    const url = { type: "url" as const };
    // "ftp://x.com" and the host in Japanese are Node's to judge (the WHATWG URL parser's). The
    // previous values kept, every value is written into the new column, in SQL or from Node.
    const refusing = await tableOf(f, [
      "https://example.com",
      "ftp://x.com",
      "has space",
      "https://\u4f8b\u3048.jp",
    ]);
    // One chunk: the refusal of row 2 (Node) comes before that of row 3 (SQL).
    expect(await changeFieldType(orm.em.fork(), change(refusing, f, url), { chunk: 4 })).toEqual({
      refused: {
        rowIds: [2n, 3n],
        count: 2,
        message: "record 2: must be an absolute http or https URL",
      },
    });
    const converting = await tableOf(f, ["https://example.com", "https://\u4f8b\u3048.jp", null]);
    expect(
      await changeFieldType(orm.em.fork(), change(converting, f, url), {
        chunk: 2,
        keepPrevious: true,
      }),
    ).toEqual({
      converted: 2,
    });
    expect(await valuesOf(converting, { ...url, id: f.id })).toEqual([
      "https://example.com",
      "https://\u4f8b\u3048.jp",
      null,
    ]);
  });

  it("refuses to make a field required while a record leaves it empty", async () => {
    const f = field("text");
    const tableId = await tableOf(f, ["a", null]);
    const done = await changeFieldType(orm.em.fork(), change(tableId, f, { type: "text" }, "made"));
    expect(done).toMatchObject({ refused: { rowIds: [2n], count: 1 } });
    expect(await valuesOf(tableId, f)).toEqual(["a", null]);
  });

  it("rewrites values in place when the column keeps its type, only those that change", async () => {
    const f = field("number", { decimals: 2 });
    const tableId = await tableOf(f, [1.25, 3, null, 2.5]);
    const to = { type: "number" as const, options: { decimals: 0 } };
    expect(await changeFieldType(orm.em.fork(), change(tableId, f, to))).toEqual({
      converted: 2,
    });
    expect(await valuesOf(tableId, { ...to, id: f.id })).toEqual([1, 3, null, 3]);
  });

  it("keeps choices by id between single and multi select, and dates as days", async () => {
    const one = field("single_select", CHOICES);
    const selects = await tableOf(one, ["Gamma", null]);
    const many = { type: "multi_select" as const, options: CHOICES };
    await changeFieldType(orm.em.fork(), change(selects, one, many));
    expect(await valuesOf(selects, { ...many, id: one.id })).toEqual([["Gamma"], null]);

    const at = field("datetime");
    const times = await tableOf(at, ["2026-03-01T23:30:00.000Z", null]);
    await changeFieldType(orm.em.fork(), change(times, at, { type: "date" }));
    expect(await valuesOf(times, { type: "date", id: at.id })).toEqual(["2026-03-01", null]);
    expect((await columnsOf(organizationId, times))[fieldColumn(at.id)]).toBe("date");
  });

  it("fills a created_at field's new column from the row's own time", async () => {
    const name = field("text");
    const tableId = await tableOf(name, ["x"]);
    const created = field("created_at");
    created.id = name.id + 1000n;
    await run(
      `update ${userTable(organizationId, tableId)} set created_at = '2026-05-06T07:08:09.010Z'`,
    );
    await changeFieldType(orm.em.fork(), change(tableId, created, { type: "datetime" }));
    expect(await valuesOf(tableId, { type: "datetime", id: created.id })).toEqual([
      "2026-05-06T07:08:09.010Z",
    ]);
  });

  it("holds the table's writes while it converts, and never its reads", async () => {
    const f = field("text");
    const tableId = await tableOf(f, ["1", "2", "3", "4"]);
    const reader = await sessionIn(url, SCHEMA);
    const writer = await sessionIn(url, SCHEMA);
    const seen: { read: unknown[]; write: string | undefined }[] = [];
    try {
      await reader.query("set lock_timeout = '200ms'");
      await writer.query("set lock_timeout = '200ms'");
      await changeFieldType(orm.em.fork(), change(tableId, f, { type: "number", options: {} }), {
        chunk: 2,
        afterChunk: async () => {
          const read = await reader.query(
            `select ${fieldColumn(f.id)} as v from ${userTable(organizationId, tableId)} order by row_id`,
          );
          let write: string | undefined;
          try {
            await writer.query("begin");
            await writer.query("select pg_advisory_xact_lock_shared(hashtextextended($1, 0))", [
              tableWriteLockKey(tableId),
            ]);
          } catch (error) {
            write = (error as { code?: string }).code;
          } finally {
            await writer.query("rollback");
          }
          seen.push({ read: read.rows.map((row) => row.v), write });
        },
      });
    } finally {
      await reader.end();
      await writer.end();
    }
    // Mid-change a read sees the values as they were (the change has not committed), and a
    // writer waiting for the table's write lock gives up (55P03: lock_not_available).
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const step of seen) expect(step).toEqual({ read: ["1", "2", "3", "4"], write: "55P03" });
    expect(await valuesOf(tableId, { type: "number", id: f.id })).toEqual([1, 2, 3, 4]);
  });
});

describe("changes of a field's values that follow its options", () => {
  const organizationId = 10n;
  const tableId = 100n;
  const one = field("single_select", CHOICES);
  const many = field("multi_select", CHOICES);
  const serial = field("autonumber");

  beforeAll(async () => {
    await applyDdl(orm.em.fork(), createTableSql(organizationId, tableId, [one, many]));
    const rows: [JsonValue, JsonValue][] = [
      ["Alpha", ["Alpha", "Gamma", "Beta, with a comma"]],
      ["Gamma", ["Gamma"]],
      [null, null],
      ["Beta, with a comma", []],
    ];
    for (const [i, [a, b]] of rows.entries()) {
      await roundTrip(
        organizationId,
        tableId,
        BigInt(i + 1),
        new Map([
          [one, a],
          [many, b],
        ]),
      );
    }
  });

  const values = async (f: StoredField) =>
    (
      await run(
        `select ${fieldColumn(f.id)} as v, version::int from ${userTable(organizationId, tableId)} order by row_id`,
      )
    ).map((row) => [columnValue(f, row.v), row.version]);

  it("clears removed choices, keeping a multi select's others in order, writing only those rows", async () => {
    await run(keepChoicesSql(organizationId, tableId, one.id, false), [["ch_b"]]);
    await run(keepChoicesSql(organizationId, tableId, many.id, true), [["ch_b"]]);
    // Each row holding a removed choice is written once per field it held one in.
    expect(await values(one)).toEqual([
      [null, 3],
      [null, 3],
      [null, 1],
      ["Beta, with a comma", 1],
    ]);
    expect(await values(many)).toEqual([
      [["Beta, with a comma"], 3],
      [[], 3],
      [null, 1],
      [[], 1],
    ]);
  });

  it("numbers a new autonumber field's rows in creation order, and only those without a number", async () => {
    await applyDdl(orm.em.fork(), addFieldSql(organizationId, tableId, serial));
    await run(
      `update ${userTable(organizationId, tableId)} set ${fieldColumn(serial.id)} = 99 where row_id = 2`,
    );
    await run(numberRowsSql(organizationId, tableId, serial.id), [10]);
    const rows = await run(
      `select ${fieldColumn(serial.id)}::int as n from ${userTable(organizationId, tableId)} order by row_id`,
    );
    expect(rows.map((row) => row.n)).toEqual([11, 99, 12, 13]);
  });
});

describe("identifiers", () => {
  it("are made from positive int64 ids only", () => {
    expect(userTable(12n, 34n)).toBe("org_12.t_34");
    expect(fieldColumn(9_223_372_036_854_775_807n)).toBe("f_9223372036854775807");
    for (const bad of [0n, -1n, 9_223_372_036_854_775_808n]) {
      expect(() => fieldColumn(bad)).toThrow(/positive int64/);
      expect(() => userTable(bad, 1n)).toThrow(/positive int64/);
    }
    expect(() => fieldColumn("1; drop table x" as unknown as bigint)).toThrow(/positive int64/);
  });
});
