import type { JsonObject } from "@bufbuild/protobuf";
import { createLogger, query, type SchemaField } from "@rowbase/kit";
import type { FieldTypeName } from "@rowbase/kit/field-types";
import { sessionIn } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CountMode, pageStatement, pageWithTotal } from "../src/db/reads.js";
import type { StoredField } from "../src/db/user-tables/columns.js";
import { addFieldSql, applyDdl, createTableSql, dropFieldSql } from "../src/db/user-tables/ddl.js";
import { TableIndexes } from "../src/db/user-tables/indexes.js";
import { fieldColumn, fieldIndex, userTable } from "../src/db/user-tables/names.js";
import { changeFieldType } from "../src/db/user-tables/type-change.js";
import { listQuery } from "../src/records.js";
import type { createRecordsOrm } from "../src/service.js";
import type { TableSchema } from "../src/table-schema.js";
import { openRecordsDatabase } from "./database.js";

/** Polls `check` until it passes (or its last failure after 10 s). */
async function eventually(check: () => Promise<void>): Promise<void> {
  for (const started = Date.now(); ; ) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() - started > 10_000) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

// The per-table storage's field indexes (docs/records-storage.md, "Index policy"): built in the
// background when a list filters on or sorts by a field of a table of 10,000 records or more,
// for at most three fields, on what the query compiler reads; a page then takes its order from
// the index and stops after the page, with the same answers as without it.

const ORGANIZATION = 9n;

let url: string;
let close: () => Promise<void>;
let orm: Awaited<ReturnType<typeof createRecordsOrm>>;

const run = <R extends object = Record<string, unknown>>(sql: string, params: unknown[] = []) =>
  query<R>(orm.em.fork(), sql, params);

beforeAll(async () => {
  ({ url, orm, close } = await openRecordsDatabase());
});

afterAll(() => close?.());

const CHOICES = {
  choices: [
    { id: "ch_a", name: "Open" },
    { id: "ch_b", name: "Done" },
  ],
};

/** Each test table's fields; ids are the table id times 100 plus the field's place. */
const SHAPE: { name: string; type: FieldTypeName; options?: JsonObject }[] = [
  { name: "Name", type: "text", options: { max_length: 100 } },
  { name: "Notes", type: "long_text" },
  { name: "Amount", type: "number", options: { decimals: 2 } },
  { name: "Due", type: "date" },
  { name: "Seen", type: "boolean" },
  { name: "Status", type: "single_select", options: CHOICES },
  { name: "Title", type: "text" },
  { name: "Email", type: "email" },
  { name: "Site", type: "url" },
];

function schemaOf(tableId: bigint): TableSchema {
  return {
    tableId,
    databaseId: 1n,
    organizationId: ORGANIZATION,
    name: `T${tableId}`,
    fields: SHAPE.map(
      (field, i): SchemaField => ({
        id: String(tableId * 100n + BigInt(i + 1)),
        name: field.name,
        type: field.type,
        options: field.options ?? {},
        required: false,
        description: "",
      }),
    ),
  };
}

function idOf(schema: TableSchema, name: string): string {
  return schema.fields.find((f) => f.name === name)!.id;
}

function stored(field: SchemaField): StoredField {
  return { id: BigInt(field.id), type: field.type, options: field.options };
}

/** A user table of `rows` records, with values of every field but the long text. */
async function tableOf(tableId: bigint, rows: number): Promise<TableSchema> {
  const schema = schemaOf(tableId);
  await applyDdl(orm.em.fork(), createTableSql(ORGANIZATION, tableId, schema.fields.map(stored)));
  const column = (name: string) => fieldColumn(BigInt(idOf(schema, name)));
  await run(
    `insert into ${userTable(ORGANIZATION, tableId)}
       (row_id, created_by, updated_by, ${["Name", "Amount", "Due", "Seen", "Status", "Title", "Email", "Site"].map(column).join(", ")})
     select $1::bigint * 100000 + g, 'system', 'system',
            'name ' || (g % 97), (g % 1000)::numeric / 2, date '2026-01-01' + (g % 365), g % 2 = 0,
            (array['ch_a', 'ch_b', null])[g % 3 + 1], case when g % 5 = 0 then '' else 't' || g end,
            'p' || (g % 50) || '@example.com', 'https://example.com/' || g
     from generate_series(1, $2::int) g`,
    [tableId, rows],
  );
  await run(`analyze ${userTable(ORGANIZATION, tableId)}`);
  return schema;
}

/** The table's field indexes in PostgreSQL's catalog: name, valid, definition. */
async function indexesOf(tableId: bigint) {
  const rows = await run<{ name: string; valid: boolean; definition: string }>(
    `select c.relname as name, i.indisvalid as valid, pg_get_indexdef(i.indexrelid) as definition
     from pg_index i join pg_class c on c.oid = i.indexrelid
     where i.indrelid = to_regclass($1) and c.relname like $2 order by c.relname`,
    [userTable(ORGANIZATION, tableId), `t\\_${tableId}\\_f%`],
  );
  return rows;
}

/** Polls until the table's index build waits for an older transaction to end. */
function buildWaiting(tableId: bigint): Promise<void> {
  return eventually(async () => {
    const [build] = await run<{ phase: string }>(
      "select phase from pg_stat_progress_create_index where relid = to_regclass($1)",
      [userTable(ORGANIZATION, tableId)],
    );
    expect(build?.phase).toBe("waiting for old snapshots");
  });
}

function indexesFor(schema: TableSchema) {
  return new TableIndexes({
    em: orm.em,
    schemaOf: async () => schema,
    logger: createLogger("records-test", "silent"),
  });
}

const read = <R extends object>(sql: string, params: readonly unknown[]) =>
  query<R>(orm.em.fork(), sql, params);

/** A list as records' `list` makes it: noted to the indexes, the page read (and returned). */
async function list(
  indexes: TableIndexes,
  schema: TableSchema,
  params: { where: string; sort: string; count?: CountMode; limit?: number; offset?: number },
) {
  const page = listQuery(
    schema,
    { limit: 20, offset: 0, count: "none", ...params },
    "columns",
    indexes.served(schema.tableId),
  );
  indexes.noteQuery(schema, page.indexCandidates);
  return page;
}

describe("a user table's field indexes", () => {
  it("are built in the background for the fields a list filters on and sorts by", async () => {
    const schema = await tableOf(11n, 10_000);
    const indexes = indexesFor(schema);
    try {
      const page = await list(indexes, schema, { where: "(Amount,gte,100)", sort: "-Due" });
      // The list is answered from the table without waiting for the build.
      expect(page.order[0]?.column).toBe(false);
      const answer = await pageWithTotal(read, page);
      expect(answer === "over_budget" ? answer : answer.records.length).toBe(20);
      await indexes.idle();
      const ids = ["Amount", "Due"].map((name) => idOf(schema, name));
      expect(await indexesOf(11n)).toEqual(
        ids.map((id) => ({
          name: fieldIndex(11n, BigInt(id)),
          valid: true,
          definition: expect.stringContaining(`btree (f_${id})`),
        })),
      );
      expect([...indexes.served(11n)].sort()).toEqual(ids.sort());
      // The build's session lock was taken and let go on one connection.
      expect(
        await run(
          `select count(*)::int as n from pg_locks where locktype = 'advisory'
           and database = (select oid from pg_database where datname = current_database())`,
        ),
      ).toEqual([{ n: 0 }]);
    } finally {
      await indexes.close();
    }
  });

  it("index a short text on its code point order, and never past three fields", async () => {
    const schema = await tableOf(12n, 10_000);
    const indexes = indexesFor(schema);
    try {
      // Booleans, long texts, URLs and texts of up to 10,000 characters get none; a select
      // and a short text do, and the third field asked for is the last.
      await list(indexes, schema, {
        where: "(Seen,checked)~and(Notes,blank)~and(Site,notblank)~and(Title,eq,t1)",
        sort: "Status",
      });
      await indexes.idle();
      await list(indexes, schema, { where: "(Name,eq,name 1)", sort: "-Amount,Due" });
      await indexes.idle();
      await list(indexes, schema, { where: "(Email,eq,p1@example.com)", sort: "Due" });
      await indexes.idle();
      const found = await indexesOf(12n);
      // In the catalog's (the names') order: Name, Name with Amount (the sort's first field
      // after the equality on Name), Status; Due came fourth.
      const id = (name: string) => BigInt(idOf(schema, name));
      expect(found.map((index) => index.name)).toEqual([
        fieldIndex(12n, id("Name")),
        fieldIndex(12n, id("Name"), id("Amount")),
        fieldIndex(12n, id("Status")),
      ]);
      expect(found.every((index) => index.valid)).toBe(true);
      expect(found.find((i) => i.name.endsWith(idOf(schema, "Name")))?.definition).toContain(
        `(NULLIF(f_${idOf(schema, "Name")}, ''::text) COLLATE "C")`,
      );
    } finally {
      await indexes.close();
    }
    // A process started afresh counts the indexes in the catalog: still no fourth.
    const again = indexesFor(schema);
    try {
      await list(again, schema, { where: "(Due,eq,2026-02-01)", sort: "" });
      await again.idle();
      expect(await indexesOf(12n)).toHaveLength(3);
    } finally {
      await again.close();
    }
  });

  it("are not built for a table of fewer than 10,000 records", async () => {
    const schema = await tableOf(13n, 9_999);
    const indexes = indexesFor(schema);
    try {
      await list(indexes, schema, { where: "(Amount,gte,100)", sort: "-Due" });
      await indexes.idle();
      expect(await indexesOf(13n)).toEqual([]);
    } finally {
      await indexes.close();
    }
  });

  it("drop an INVALID leftover and build it again", async () => {
    const schema = await tableOf(14n, 10_000);
    const amount = idOf(schema, "Amount");
    const name = fieldIndex(14n, BigInt(amount));
    // A unique index over repeated values fails and leaves an INVALID index of that name.
    await expect(
      run(
        `create unique index concurrently ${name} on ${userTable(ORGANIZATION, 14n)} (f_${amount})`,
      ),
    ).rejects.toThrow();
    expect(await indexesOf(14n)).toMatchObject([{ name, valid: false }]);
    const indexes = indexesFor(schema);
    try {
      await list(indexes, schema, { where: "(Amount,lt,3)", sort: "" });
      await indexes.idle();
      const [index] = await indexesOf(14n);
      expect(index).toMatchObject({ name, valid: true });
      expect(index?.definition).not.toContain("UNIQUE");
    } finally {
      await indexes.close();
    }
  });

  it("give way to a schema change: the build is cancelled, and made again later", async () => {
    const schema = await tableOf(17n, 10_000);
    const amount = idOf(schema, "Amount");
    const name = fieldIndex(17n, BigInt(amount));
    const indexes = indexesFor(schema);
    // A transaction with an older snapshot: the build waits for it before it can finish.
    const older = await sessionIn(url, "records");
    try {
      await older.query("begin isolation level repeatable read");
      await older.query("select 1");
      await list(indexes, schema, { where: "(Amount,gte,1)", sort: "" });
      await buildWaiting(17n);
      // The new column is added at the first attempt, without waiting for the build.
      const added = stored({ ...schema.fields[0]!, id: "1799" });
      await applyDdl(orm.em.fork(), addFieldSql(ORGANIZATION, 17n, added), {
        lockTimeoutMs: 1_000,
        attempts: 1,
      });
      await indexes.idle();
    } finally {
      await older.query("rollback");
      await older.end();
      await indexes.close();
    }
    expect(await indexesOf(17n)).toMatchObject([{ name, valid: false }]);
    // A later list (here of a process started since) drops the leftover and builds it again.
    const again = indexesFor(schema);
    try {
      await list(again, schema, { where: "(Amount,gte,1)", sort: "" });
      await again.idle();
      expect(await indexesOf(17n)).toMatchObject([{ name, valid: true }]);
    } finally {
      await again.close();
    }
  });

  it("are not waited for past their start when the process closes", async () => {
    const schema = await tableOf(18n, 10_000);
    const indexes = indexesFor(schema);
    const older = await sessionIn(url, "records");
    try {
      await older.query("begin isolation level repeatable read");
      await older.query("select 1");
      await list(indexes, schema, { where: "(Due,eq,2026-03-01)", sort: "" });
      await buildWaiting(18n);
      // The build would wait for the older transaction; close cancels it instead.
      await indexes.close();
      expect(await indexesOf(18n)).toMatchObject([{ valid: false }]);
    } finally {
      await older.query("rollback");
      await older.end();
    }
  });

  it("serve a page's order once built, with the answers of a page without them", async () => {
    const schema = await tableOf(15n, 10_000);
    const indexes = indexesFor(schema);
    try {
      await list(indexes, schema, { where: "(Amount,gte,100)", sort: "-Due" });
      await indexes.idle();
      await list(indexes, schema, { where: "(Name,eq,name 5)", sort: "Title" });
      await indexes.idle();
      expect(indexes.served(15n).size).toBe(3);
      const page = await list(indexes, schema, { where: "(Amount,gte,100)", sort: "-Due" });
      expect(page.order[0]?.column).toBe(true);
      const { sql, params } = pageStatement(page);
      const text = (await read<{ "QUERY PLAN": string }>(`explain ${sql}`, params))
        .map((row) => row["QUERY PLAN"])
        .join("\n");
      expect(text).toContain(fieldIndex(15n, BigInt(idOf(schema, "Due"))));
      // Text equality is compared in the index's collation: the Name index serves it.
      const byName = await list(indexes, schema, { where: "(Name,eq,name 5)", sort: "" });
      const nameText = (
        await read<{ "QUERY PLAN": string }>(
          `explain ${pageStatement(byName).sql}`,
          pageStatement(byName).params,
        )
      )
        .map((row) => row["QUERY PLAN"])
        .join("\n");
      expect(nameText).toContain(fieldIndex(15n, BigInt(idOf(schema, "Name"))));

      const cases: { where: string; sort: string; count: CountMode; offset: number }[] = [];
      for (const count of ["none", "estimated", "exact"] as const) {
        for (const offset of [0, 35, 4_990]) {
          cases.push({ where: "(Amount,gte,100)", sort: "-Due", count, offset });
          cases.push({ where: "", sort: "Due,-Amount", count, offset });
          cases.push({ where: "(Status,eq,Open)", sort: "Name", count, offset });
          cases.push({ where: "(Title,neq,t5)", sort: "-Name,Title", count, offset });
        }
      }
      for (const params of cases) {
        const withIndexes = listQuery(
          schema,
          { ...params, limit: 25 },
          "columns",
          indexes.served(15n),
        );
        const without = listQuery(schema, { ...params, limit: 25 }, "columns");
        expect({ params, page: await pageWithTotal(read, withIndexes) }).toEqual({
          params,
          page: await pageWithTotal(read, without),
        });
      }
    } finally {
      await indexes.close();
    }
  });

  it("go with their field's column, and when a field may no longer have one", async () => {
    const schema = await tableOf(16n, 10_000);
    const indexes = indexesFor(schema);
    try {
      await list(indexes, schema, { where: "(Amount,gte,1)~or(Name,eq,x)", sort: "Due" });
      await indexes.idle();
      expect(await indexesOf(16n)).toHaveLength(3);
    } finally {
      await indexes.close();
    }
    const field = (name: string) => stored(schema.fields.find((f) => f.name === name)!);
    const remaining = async () =>
      (await indexesOf(16n)).map((index) => index.name.slice(`t_16_f`.length));
    // A deleted field's column takes its index with it.
    await applyDdl(orm.em.fork(), dropFieldSql(ORGANIZATION, 16n, field("Due").id));
    expect(await remaining()).toEqual([idOf(schema, "Amount"), idOf(schema, "Name")].sort());
    // A type change through a shadow column: the old column's index goes with it.
    const amount = field("Amount");
    expect(
      await changeFieldType(orm.em.fork(), {
        organizationId: ORGANIZATION,
        tableId: 16n,
        from: amount,
        to: { ...amount, type: "text", options: {} },
        required: "none",
      }),
    ).toEqual({ converted: 10_000 });
    expect(await remaining()).toEqual([idOf(schema, "Name")]);
    // In place: a short text whose values may now be 10,000 characters long loses its index,
    // so that a long value can be written.
    const name = field("Name");
    expect(
      await changeFieldType(orm.em.fork(), {
        organizationId: ORGANIZATION,
        tableId: 16n,
        from: name,
        to: { ...name, options: {} },
        required: "none",
      }),
    ).toEqual({ converted: 0 });
    expect(await remaining()).toEqual([]);
    await run(`update ${userTable(ORGANIZATION, 16n)} set f_${name.id} = $1 where row_id = $2`, [
      "x".repeat(10_000),
      16n * 100000n + 1n,
    ]);
  });

  it("of two fields serve an equality ANDed with a range, count its matches, and go with either", async () => {
    const schema = await tableOf(20n, 10_000);
    const [name, amount, due] = ["Name", "Amount", "Due"].map((n) => BigInt(idOf(schema, n))) as [
      bigint,
      bigint,
      bigint,
    ];
    const params = {
      where: "(Amount,gte,100)~and(Name,eq,name 5)",
      sort: "-Due",
      count: "exact" as const,
    };
    const indexes = indexesFor(schema);
    try {
      // Without the filter's index, an exact count reads the matches once, to count and sort them.
      expect((await list(indexes, schema, params)).order[0]?.column).toBe(false);
      await indexes.idle();
      // The filter's pair, and for the order the equality's field with the sort's, which hands
      // over the rows of `name 5` in Due order.
      expect(await indexesOf(20n)).toMatchObject([
        { name: fieldIndex(20n, name, amount), valid: true },
        { name: fieldIndex(20n, name, due), valid: true },
      ]);
      expect([...indexes.served(20n)].sort()).toEqual([`${name},${amount}`, `${name},${due}`]);
      // With them, the page takes its order from the sort's index, and the count comes from the
      // filter's; the answer is the one a plain statement gives.
      const page = await list(indexes, schema, params);
      expect(page.order[0]?.column).toBe(true);
      const answer = await pageWithTotal(read, page);
      const [expected] = await run<{ n: string }>(
        `select count(*)::text as n from ${userTable(ORGANIZATION, 20n)}
         where f_${amount} >= 100 and f_${name} = 'name 5'`,
      );
      expect(answer === "over_budget" ? answer : answer.total).toBe(BigInt(expected!.n));
      expect(BigInt(expected!.n)).toBeGreaterThan(20n);
      const plan = await run<{ "QUERY PLAN": string }>(`explain select count(*) ${page.matching}`, [
        ...page.params,
      ]);
      expect(plan.map((line) => line["QUERY PLAN"]).join("\n")).toContain(
        fieldIndex(20n, name, amount),
      );
    } finally {
      await indexes.close();
    }
    // A change of one of the two fields that keeps its column, after which it may no longer
    // have an index, takes the two fields' indexes with it too (both read Name's column).
    const field = stored(schema.fields.find((f) => f.name === "Name")!);
    await changeFieldType(orm.em.fork(), {
      organizationId: ORGANIZATION,
      tableId: 20n,
      from: field,
      to: { ...field, options: {} },
      required: "none",
    });
    expect((await indexesOf(20n)).map((index) => index.name)).toEqual([]);
  });

  it("go in a change that keeps the field's previous column to take it back", async () => {
    const schema = await tableOf(19n, 10_000);
    const indexes = indexesFor(schema);
    try {
      await list(indexes, schema, { where: "(Name,eq,x)", sort: "" });
      await indexes.idle();
    } finally {
      await indexes.close();
    }
    const name = stored(schema.fields.find((f) => f.name === "Name")!);
    expect(await indexesOf(19n)).toMatchObject([{ name: fieldIndex(19n, name.id), valid: true }]);
    // The column's type stays, but the old values are kept aside in a column of their own: the
    // index goes rather than follow them there.
    expect(
      await changeFieldType(
        orm.em.fork(),
        {
          organizationId: ORGANIZATION,
          tableId: 19n,
          from: name,
          to: { ...name, options: { max_length: 600 } },
          required: "none",
        },
        { keepPrevious: true },
      ),
    ).toMatchObject({ converted: expect.any(Number) });
    expect(await indexesOf(19n)).toEqual([]);
  });
});
