import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { query } from "@rowbase/kit";
import type { FieldLike } from "@rowbase/kit/field-types";
import { createTestDatabase, testInfra, validationOf } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CreateTarget, createRecords } from "../src/db/create-gate.js";
import {
  type CountMode,
  findRecord,
  findRecords,
  pageWithTotal,
  readRecordVersion,
} from "../src/db/reads.js";
import { columnParam, columnTypeOf } from "../src/db/user-tables/columns.js";
import { applyDdl, createTableSql } from "../src/db/user-tables/ddl.js";
import { createFieldIndexSql, fieldIndexExpression } from "../src/db/user-tables/indexes.js";
import { fieldColumn, userTable } from "../src/db/user-tables/names.js";
import { userTableRows } from "../src/db/user-tables/table-rows.js";
import {
  allocateRowIds,
  deleteRecordIfUnchanged,
  deleteRecords,
  writeRecordIfUnchanged,
  writeRecords,
} from "../src/db/writes.js";
import {
  buildWhere,
  orderBySql,
  orderTerms,
  parseSort,
  printWhere,
  QueryError,
  type QueryField,
  type Storage,
} from "../src/query/index.js";
import { listQuery } from "../src/records.js";
import { createRecordsOrm, migrateRecords } from "../src/service.js";
import type { TableSchema } from "../src/table-schema.js";
import {
  integer,
  pick,
  type Random,
  randomFittingTree,
  randomTree,
  seededRandom,
} from "./random-where.js";

// The query language on the per-table storage (a column per field, choice ids in selects) must
// select and order exactly the records it selects and orders on the jsonb storage: the same
// random records are written to both, and every random `where` and `sort` is compiled for each
// and run against PostgreSQL. A failure names the seed (QUERY_SEED=<seed> starts there).

const FIRST_SEED = Number(process.env.QUERY_SEED ?? 1);
const ORGANIZATION = 5n;
const TABLE = 50n;
const NOW = new Date("2026-11-21T10:15:00.000Z");

const CHOICES = ["Active", "Done", "a", "b", "a,b", 'say "hi"', "Zoë", "c"];
const CHOICE_OPTIONS = { choices: CHOICES.map((name, i) => ({ id: `ch_${i}x`, name })) };

const FIELDS: (QueryField & FieldLike)[] = [
  { id: "1", name: "Name", type: "text" },
  { id: "2", name: "Notes", type: "long_text" },
  { id: "3", name: "Age", type: "number", options: { decimals: 2 } },
  { id: "4", name: "Vip", type: "boolean" },
  { id: "5", name: "Due", type: "date" },
  { id: "6", name: "At", type: "datetime" },
  { id: "7", name: "Status", type: "single_select", options: CHOICE_OPTIONS },
  { id: "8", name: "Tags", type: "multi_select", options: CHOICE_OPTIONS },
  { id: "9", name: "Email", type: "email" },
  { id: "12", name: "Meta", type: "json" },
  { id: "14", name: "Seq", type: "autonumber" },
  { id: "15", name: "Created", type: "created_at" },
  { id: "16", name: "Updated", type: "updated_at" },
].map((field) =>
  field.options
    ? {
        ...field,
        choices: CHOICE_OPTIONS.choices.map((c) => c.name),
        choiceIds: CHOICE_OPTIONS.choices.map((c) => c.id),
      }
    : field,
) as (QueryField & FieldLike)[];

const TEXTS = [
  "",
  "Ada",
  "ada lovelace",
  "bob",
  "Zoë",
  "ΟΔΥΣΣΕΥΣ",
  "100% cotton_wool",
  "a\\b",
  "42",
  "ß",
];

function randomRecord(random: Random, seq: number): JsonObject {
  const maybe = <T extends JsonValue>(value: () => T): T | null =>
    random() < 0.25 ? null : value();
  const day = () =>
    `2026-${String(integer(random, 10, 12)).padStart(2, "0")}-${String(integer(random, 1, 28)).padStart(2, "0")}`;
  return {
    1: maybe(() => pick(random, TEXTS)),
    2: maybe(() => pick(random, TEXTS)),
    3: maybe(() => Math.round((random() * 200 - 100) * 100) / 100),
    4: maybe(() => random() < 0.5),
    5: maybe(day),
    6: maybe(
      () =>
        `${day()}T${String(integer(random, 0, 23)).padStart(2, "0")}:${pick(random, ["00", "30"])}:00.000Z`,
    ),
    7: maybe(() => pick(random, CHOICES)),
    8: maybe(() => [
      ...new Set(Array.from({ length: integer(random, 0, 3) }, () => pick(random, CHOICES))),
    ]),
    9: maybe(() => pick(random, ["ada@example.com", "bob@example.org"])),
    12: maybe(() => pick(random, [{ k: 1 }, [], "", [1, 2], "x"] as JsonValue[])),
    14: seq,
  };
}

let url: string;
let drop: () => Promise<void>;
let orm: Awaited<ReturnType<typeof createRecordsOrm>>;

const run = (sql: string, params: readonly unknown[] = []) =>
  query<{ row_id: string }>(orm.em.fork(), sql, params);

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  url = db.url;
  drop = db.drop;
  await migrateRecords(url);
  orm = await createRecordsOrm(url);
  await applyDdl(
    orm.em.fork(),
    createTableSql(
      ORGANIZATION,
      TABLE,
      FIELDS.map((f) => ({ ...f, id: BigInt(f.id) })),
    ),
  );
  // The fixture's rows take ids 1-80 themselves: new records take theirs after them.
  await run("select setval(pg_get_serial_sequence('record', 'row_id'), 1000)");
  const random = seededRandom(4242);
  const stored = FIELDS.filter((f) => columnTypeOf(f.type));
  for (let n = 1; n <= 80; n++) {
    const data = randomRecord(random, n);
    const created = new Date(Date.UTC(2026, 0, 1 + integer(random, 0, 9))).toISOString();
    const updated = new Date(Date.UTC(2026, 10, 15 + integer(random, 0, 9), 12)).toISOString();
    await run(
      `insert into record (row_id, table_id, organization_id, data, created_at, updated_at, created_by, updated_by)
       values ($1, $2, $3, $4::jsonb, $5, $6, 'system', 'system')`,
      [n, TABLE, ORGANIZATION, JSON.stringify(data), created, updated],
    );
    await run(
      `insert into ${userTable(ORGANIZATION, TABLE)}
         (row_id, created_at, updated_at, created_by, updated_by${stored.map((f) => `, ${fieldColumn(BigInt(f.id))}`).join("")})
       values ($1, $2, $3, 'system', 'system'${stored.map((f, i) => `, $${i + 4}${f.type === "json" ? "::jsonb" : ""}`).join("")})`,
      [
        n,
        created,
        updated,
        ...stored.map((f) => columnParam(f, (data[f.id] ?? null) as JsonValue)),
      ],
    );
  }
});

afterAll(async () => {
  await orm?.close();
  await drop?.();
});

/** The row ids a where and sort select, on one storage; or the QueryError it is refused with. */
async function select(storage: Storage, where: string, sort: string): Promise<string[] | string> {
  try {
    const order = orderTerms(sort ? parseSort(sort, FIELDS) : [], { tableAlias: "r", storage });
    const paramOffset = storage === "jsonb" ? 1 : 0;
    const filter = where
      ? buildWhere(where, FIELDS, { paramOffset, now: NOW, tableAlias: "r", storage })
      : { sql: "true", params: [] };
    const from =
      storage === "jsonb"
        ? "from record r where r.table_id = $1 and"
        : `from ${userTable(ORGANIZATION, TABLE)} r where`;
    const rows = await run(
      `select r.row_id::text ${from} ${filter.sql} order by ${orderBySql(order)}`,
      storage === "jsonb" ? [TABLE, ...filter.params] : filter.params,
    );
    return rows.map((row) => row.row_id);
  } catch (error) {
    if (error instanceof QueryError) return `QueryError: ${error.message}`;
    throw error;
  }
}

const REFS = [...FIELDS.map((f) => f.name), "row_id", "created_at", "updated_at"];
const SORTABLE = FIELDS.filter((f) => f.type !== "json" && f.type !== "multi_select").map(
  (f) => f.name,
);

function randomSort(random: Random): string {
  const keys = [
    ...new Set(Array.from({ length: integer(random, 0, 3) }, () => pick(random, SORTABLE))),
  ];
  return keys.map((key) => (random() < 0.5 ? `-${key}` : key)).join(",");
}

const SCHEMA: TableSchema = {
  tableId: TABLE,
  databaseId: 1n,
  organizationId: ORGANIZATION,
  name: "T",
  fields: FIELDS.map((f) => ({
    id: f.id,
    name: f.name,
    type: f.type,
    options: f.options ?? {},
    required: false,
    description: "",
  })),
};

/** Every field that gets an index under the policy (`fieldIndexExpression`). */
const INDEXED_FIELDS = FIELDS.filter((f) => fieldIndexExpression({ ...f, id: BigInt(f.id) }));

/** Every index a list could ask for: each such field's, and each pair's (`indexKeysOf`). */
const INDEXED = new Set([
  ...INDEXED_FIELDS.map((f) => f.id),
  ...INDEXED_FIELDS.flatMap((a) =>
    INDEXED_FIELDS.filter((b) => b !== a).map((b) => `${a.id},${b.id}`),
  ),
]);

describe("a list's page on a table per user table", () => {
  it("answers the records, count and has_more the jsonb storage answers", async () => {
    const stored = (field: (typeof FIELDS)[number]) => ({ ...field, id: BigInt(field.id) });
    for (const a of INDEXED_FIELDS) {
      await run(createFieldIndexSql(ORGANIZATION, TABLE, [stored(a)])!);
      for (const b of INDEXED_FIELDS) {
        if (b !== a) await run(createFieldIndexSql(ORGANIZATION, TABLE, [stored(a), stored(b)])!);
      }
    }
    expect(INDEXED_FIELDS.map((f) => f.id).sort()).toEqual(["14", "3", "5", "6", "7", "9"]);
    const read = <R extends object>(sql: string, params: readonly unknown[]) =>
      query<R>(orm.em.fork(), sql, params);
    let pages = 0;
    for (let seed = FIRST_SEED; seed < FIRST_SEED + 150; seed++) {
      const random = seededRandom(seed);
      const fitting = FIELDS.map((f) => ({ ref: f.name, type: f.type }));
      const params = {
        where: random() < 0.3 ? "" : printWhere(randomFittingTree(random, fitting, 2)),
        sort: randomSort(random),
        limit: integer(random, 1, 30),
        offset: pick(random, [0, 0, integer(random, 0, 90)]),
        count: pick(random, ["exact", "estimated", "none"] as CountMode[]),
      };
      const page = async (storage: Storage, indexed?: ReadonlySet<string>) => {
        try {
          return await pageWithTotal(read, listQuery(SCHEMA, params, storage, indexed));
        } catch (error) {
          // A refused parameter is refused the same way by both.
          return `refused: ${JSON.stringify(await validationOf(Promise.reject(error)))}`;
        }
      };
      const [jsonb, columns] = [await page("jsonb"), await page("columns")];
      expect({ seed, params, columns }).toEqual({ seed, params, columns: jsonb });
      // With every field's index built, the page takes its order from them where it may.
      const indexed = await page("columns", INDEXED);
      expect({ seed, params, indexed }).toEqual({ seed, params, indexed: jsonb });
      if (typeof jsonb === "object" && jsonb.records.length > 0) pages += 1;
    }
    expect(pages).toBeGreaterThan(60);
  });
});

describe("a create on a table per user table", () => {
  const read = <R extends object>(sql: string, params: readonly unknown[]) =>
    query<R>(orm.em.fork(), sql, params);
  const schemaOf = (tableId: bigint): TableSchema => ({ ...SCHEMA, tableId });

  async function create(tableId: bigint, storage: Storage, datas: JsonObject[], limit = 10_000n) {
    const em = orm.em.fork();
    const ids = await allocateRowIds(em, datas.length);
    const target: CreateTarget = {
      tableId,
      organizationId: ORGANIZATION + 1n,
      limit,
      autonumberFields: null,
      fields: [],
      pendingChecked: [],
      actor: "user:1",
      ...(storage === "columns"
        ? { rows: userTableRows(ORGANIZATION + 1n, tableId, SCHEMA.fields) }
        : {}),
    };
    return createRecords(
      em,
      target,
      datas.map((data, i) => ({ rowId: ids[i]!, data })),
      [],
    );
  }

  async function all(tableId: bigint, storage: Storage) {
    const page = await pageWithTotal(
      read,
      listQuery(
        { ...schemaOf(tableId), organizationId: ORGANIZATION + 1n },
        { limit: 1000, offset: 0, where: "", sort: "" },
        storage,
      ),
    );
    if (page === "over_budget") throw new Error("over budget");
    return page;
  }

  it("stores what the jsonb storage stores, and reads it back the same", async () => {
    await applyDdl(
      orm.em.fork(),
      createTableSql(
        ORGANIZATION + 1n,
        61n,
        FIELDS.map((f) => ({ ...f, id: BigInt(f.id) })),
      ),
    );
    const random = seededRandom(7);
    const datas = Array.from({ length: 40 }, (_, i) => randomRecord(random, i + 1));
    const [jsonb, columns] = [
      await create(60n, "jsonb", datas),
      await create(61n, "columns", datas),
    ];
    expect(columns.outcome).toBe("ok");
    expect(jsonb.outcome).toBe("ok");
    const [a, b] = [await all(60n, "jsonb"), await all(61n, "columns")];
    expect(b.total).toBe(40n);
    expect(b.records.map((r) => r.data)).toEqual(a.records.map((r) => r.data));
    const rows = await read<{ created_by: string; version: string }>(
      `select created_by, version::text from ${userTable(ORGANIZATION + 1n, 61n)} limit 1`,
      [],
    );
    expect(rows).toEqual([{ created_by: "user:1", version: "1" }]);
  });

  it("updates, finds and deletes records as the jsonb storage does", async () => {
    const em = orm.em.fork();
    const tables = { jsonb: 60n, columns: 61n } as const;
    const rowsOf = (storage: Storage) =>
      storage === "columns"
        ? userTableRows(ORGANIZATION + 1n, tables.columns, SCHEMA.fields)
        : undefined;
    // The single-record statements write their events in the same statement; these stay in the
    // outbox (no relay runs here).
    const event = () => [
      { subject: "test.event", payload: new Uint8Array([1]), eventId: crypto.randomUUID() },
    ];
    const results: Record<Storage, unknown> = { jsonb: undefined, columns: undefined };
    for (const storage of ["jsonb", "columns"] as const) {
      const random = seededRandom(11);
      const table = rowsOf(storage);
      const tableId = tables[storage];
      const page = await all(tableId, storage);
      const ids = page.records.map((r) => r.rowId);
      // A batch update (locked, then written), a single update at its version, a delete at its.
      const patched = ids.slice(0, 5).map((rowId, i) => ({
        rowId,
        data: { ...page.records[i]!.data, ...randomRecord(random, 100 + i) },
      }));
      await em.transactional(async (tx) => {
        const found = await findRecords(tx, tableId, ids.slice(0, 5), { lock: true }, table);
        expect(found === "over_budget" ? found : found.length).toBe(5);
        await writeRecords(tx, "user:2", patched, [], table);
      });
      const read = await readRecordVersion(em, tableId, ids[5]!, table);
      const written = await writeRecordIfUnchanged(
        em,
        {
          tableId,
          rowId: ids[5]!,
          version: read!.version,
          actor: "user:3",
          data: { ...read!.record.data, 1: "one at its version" },
          fields: ["1"],
          ...(table ? { rows: table } : {}),
        },
        event(),
      );
      expect(written?.data[1]).toBe("one at its version");
      // A version that is no longer the row's writes nothing.
      const stale = await writeRecordIfUnchanged(
        em,
        {
          tableId,
          rowId: ids[5]!,
          version: read!.version,
          actor: "user:3",
          data: {},
          fields: [],
          ...(table ? { rows: table } : {}),
        },
        event(),
      );
      expect(stale).toBeUndefined();
      const victim = await readRecordVersion(em, tableId, ids[6]!, table);
      expect(
        await deleteRecordIfUnchanged(
          em,
          {
            tableId,
            organizationId: ORGANIZATION + 1n,
            rowId: ids[6]!,
            version: victim!.version,
            ...(table ? { rows: table } : {}),
          },
          event(),
        ),
      ).toBe(true);
      await deleteRecords(em, tableId, [ids[7]!], table);
      // Another table's id never reaches these rows.
      expect(await findRecord(em, tableId + 100n, ids[8]!, table)).toBeUndefined();
      const after = await all(tableId, storage);
      // A read of one record builds its data apart from a page's (TableRows.values, dataOf):
      // the same values, keys in the same order.
      for (const record of after.records.slice(0, 20)) {
        const one = await findRecord(em, tableId, record.rowId, table);
        expect(JSON.stringify(one?.data)).toBe(JSON.stringify(record.data));
        const versioned = await readRecordVersion(em, tableId, record.rowId, table);
        expect(JSON.stringify(versioned?.record.data)).toBe(JSON.stringify(record.data));
      }
      results[storage] = {
        total: after.total,
        datas: after.records.map((r) => r.data),
        one: (await findRecord(em, tableId, ids[5]!, table))?.data,
      };
    }
    expect(results.columns).toEqual(results.jsonb);
    const [version] = await read<{ version: string }>(
      `select version::text from ${userTable(ORGANIZATION + 1n, 61n)} order by row_id limit 1`,
      [],
    );
    expect(version?.version).toBe("2");
  });

  it("counts against the organization's record limit and writes nothing past it", async () => {
    const before = await all(61n, "columns");
    const [usage] = await read<{ records: string }>("select record_usage($1)::text as records", [
      ORGANIZATION + 1n,
    ]);
    // 40 records in each table, two of each deleted since.
    expect(usage?.records).toBe("78");
    const refused = await create(61n, "columns", [{}, {}], 79n);
    expect(refused).toEqual({ outcome: "over_limit" });
    expect((await all(61n, "columns")).total).toBe(before.total);
  });
});

describe("the query language on a table per user table", () => {
  it("selects and orders what it does on the jsonb storage, for random filters and sorts", async () => {
    let compared = 0;
    let matched = 0;
    for (let seed = FIRST_SEED; seed < FIRST_SEED + 400; seed++) {
      const random = seededRandom(seed);
      const fitting = FIELDS.map((f) => ({ ref: f.name, type: f.type }));
      const tree =
        random() < 0.7 ? randomFittingTree(random, fitting, 3) : randomTree(random, REFS, 3);
      const where = printWhere(tree);
      const sort = randomSort(random);
      const [jsonb, columns] = [
        await select("jsonb", where, sort),
        await select("columns", where, sort),
      ];
      expect({ seed, where, sort, columns }).toEqual({ seed, where, sort, columns: jsonb });
      compared += 1;
      if (Array.isArray(jsonb) && jsonb.length > 0 && jsonb.length < 80) matched += 1;
    }
    // The random filters must mostly select some records and not all, or they test little.
    expect(compared).toBe(400);
    expect(matched).toBeGreaterThan(100);
  });

  it("selects by choice regardless of case and ignores names that are no choice", async () => {
    for (const where of [
      "(Status,eq,active)",
      "(Status,in,Done,nope)",
      "(Tags,anyof,A,zzz)",
      "(Tags,allof,a,b)",
      "(Tags,nanyof,c)",
      "(Status,like,ct)",
      "(Status,nlike,a)",
      "(Status,eq,nope)",
    ]) {
      const jsonb = await select("jsonb", where, "");
      expect({ where, columns: await select("columns", where, "") }).toEqual({
        where,
        columns: jsonb,
      });
    }
  });

  it("orders a multi select by the names of its choices in turn", async () => {
    const rows = await query<{ row_id: string; names: string[] | null }>(
      orm.em.fork(),
      `select r.row_id::text, (select array_agg(c.name order by u.n) from unnest(r.f_8) with ordinality u(id, n)
         join jsonb_to_recordset($1::jsonb) as c(id text, name text) on c.id = u.id) as names
       from ${userTable(ORGANIZATION, TABLE)} r
       order by ${orderBySql(orderTerms(parseSort("Tags", FIELDS), { tableAlias: "r", storage: "columns" }))}`,
      [JSON.stringify(CHOICE_OPTIONS.choices)],
    );
    const named = rows.map((row) => row.names).filter((names): names is string[] => names !== null);
    const byName = (a: string[], b: string[]) => {
      for (let i = 0; i < Math.min(a.length, b.length); i++) {
        const order = Buffer.compare(Buffer.from(a[i]!), Buffer.from(b[i]!));
        if (order !== 0) return order;
      }
      return a.length - b.length;
    };
    expect(named.length).toBeGreaterThan(20);
    expect(named).toEqual([...named].sort(byName));
    // Blank ones (none or no choice) last, ascending.
    const firstBlank = rows.findIndex((row) => row.names === null);
    expect(rows.slice(firstBlank).every((row) => row.names === null)).toBe(true);
  });
});
