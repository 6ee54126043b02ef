import { parseArgs } from "node:util";
import type { JsonValue } from "@bufbuild/protobuf";
import { createTestDatabase, testInfra } from "@rowbase/kit/testing";
import { migrateRecords } from "@rowbase/records";
import {
  type CountMode,
  columnFromJson,
  columnJson,
  columnTypeOf,
  createTableSql,
  fieldColumn,
  listQuery,
  type PageQuery,
  pageStatement,
  pageWithTotal,
  type TableSchema,
  userTable,
  userTableIndex,
} from "@rowbase/records/statements";
import pg from "pg";
import { SCHEMA_FIELDS } from "./bench-fields.js";
import { type FieldName, random, recordData } from "./seed.js";

/**
 * What the per-table storage (a PostgreSQL table per user table, a typed column per field) gives
 * and costs at the PostgreSQL level, against the one shared jsonb record table: the benchmark's
 * table and records written identically to both, then the list statements the records service
 * builds (`listQuery`, `pageWithTotal`) sent from a few connections, the write cost of field
 * indexes, and their sizes. Not part of `npm test`; see README.md ("The typed storage, at the
 * PostgreSQL level").
 *
 *   npx tsx test/bench/typed-storage.ts [--records N] [--clients C] [--seconds S] [--explain]
 */

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "100000" },
    clients: { type: "string", default: "8" },
    seconds: { type: "string", default: "10" },
    explain: { type: "boolean", default: false },
  },
});
const RECORDS = Number(args.records);
const CLIENTS = Number(args.clients);
const SECONDS = Number(args.seconds);
if (!(RECORDS >= 1000 && CLIENTS >= 1 && SECONDS > 0)) {
  throw new Error("--records (at least 1000), --clients and --seconds must be positive numbers");
}
const WARM_UP_SECONDS = Math.min(2, SECONDS / 2);
/** Rows per insert statement, when loading and when measuring writes. */
const BATCH = 1000;
/** Rows the write measurement inserts into each configuration (and deletes again). */
const WRITE_ROWS = 10_000;
const ORGANIZATION = 1n;
const TABLE = 1n;

const SCHEMA: TableSchema = {
  tableId: TABLE,
  databaseId: 1n,
  organizationId: ORGANIZATION,
  name: "Customers",
  fields: SCHEMA_FIELDS,
};
const fieldByName = (name: FieldName) => SCHEMA_FIELDS.find((f) => f.name === name)!;
const column = (name: FieldName) => fieldColumn(BigInt(fieldByName(name).id));
const TYPED = userTable(ORGANIZATION, TABLE);

/** The benchmark's where+sort scenario (scenarios.ts). */
const WHERE = "(Amount,gte,500)~and(Status,eq,Open)";
const SORT = "-Due";

/** The field indexes of the write and size measurements, in the order they are added. */
const INDEXED: readonly FieldName[] = ["Status", "Due", "Amount", "Seen", "Name"];

/** The totals the compared pages answered, for the report. */
const totals: string[] = [];
const started = Date.now();
const say = (line: string) =>
  process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}\n`);

const database = await createTestDatabase((await testInfra()).databaseUrl);
const connect = async () => {
  const client = new pg.Client({
    connectionString: database.url,
    options: "-c search_path=records -c statement_timeout=300000",
  });
  await client.connect();
  return client;
};
let admin: pg.Client | undefined;
let clients: pg.Client[] = [];
try {
  await migrateRecords(database.url);
  admin = await connect();
  clients = await Promise.all(Array.from({ length: CLIENTS }, connect));
  for (const sql of createTableSql(
    ORGANIZATION,
    TABLE,
    SCHEMA_FIELDS.map((f) => ({ id: BigInt(f.id), type: f.type, options: f.options })),
  )) {
    await admin.query(sql);
  }
  const { version, cpus } = await machine(admin);
  say(`${version}; ${cpus} cores; ${RECORDS} records, ${CLIENTS} clients, ${SECONDS} s each`);

  const loadMs = await load(admin);
  say(`loaded: jsonb ${loadMs.jsonb} ms, typed ${loadMs.typed} ms`);
  await admin.query("vacuum analyze record");
  await admin.query(`vacuum analyze ${TYPED}`);

  const reads: Row[] = [];
  const read = async (label: string, storage: string, page: () => PageQuery) => {
    const plan = await explain(page());
    const result = await measure((client) => listPage(client, page()));
    say(`${label} on ${storage}: ${fmt(result)}, PostgreSQL alone ${ms(plan.ms)} ms`);
    if (args.explain) process.stdout.write(`${plan.text}\n`);
    reads.push({ label, storage, ...result, alone: plan.ms });
  };
  const plain =
    (storage: "jsonb" | "columns", count: CountMode = "exact") =>
    () =>
      listQuery(SCHEMA, { limit: 50, offset: 0, where: "", sort: "", count }, storage);
  const filtered = (storage: "jsonb" | "columns", count: CountMode) => () =>
    listQuery(SCHEMA, { limit: 50, offset: 0, where: WHERE, sort: SORT, count }, storage);
  /**
   * The same page, built as `pageStatement` builds one whose sort an index keeps in order (its
   * terms `column`) and whose filter is read from the table's columns (`filterReadsData` false):
   * the page's ids come from the sorted index and stop after the page, and the count is its own
   * subquery. `listQuery` gives the typed storage's field sorts the other path (every match
   * read, then sorted); this is what marking an indexed field's sort as such gives.
   */
  const indexOrdered = (count: CountMode) => () => {
    const page = filtered("columns", count)();
    return {
      ...page,
      filterReadsData: false,
      order: page.order.map((term) => ({ ...term, column: true })),
    };
  };
  const COUNTS: CountMode[] = ["exact", "estimated", "none"];

  await sameAnswers(plain("jsonb"), plain("columns"));
  for (const count of COUNTS)
    await sameAnswers(filtered("jsonb", count), filtered("columns", count));
  await sameAnswers(plain("jsonb", "none"), plain("columns", "none"));
  await read("list 50", "jsonb", plain("jsonb"));
  await read("list 50", "typed", plain("columns"));
  await read("list 50, count=none", "jsonb", plain("jsonb", "none"));
  await read("list 50, count=none", "typed", plain("columns", "none"));
  for (const count of COUNTS) {
    await read(`where+sort, count=${count}`, "jsonb", filtered("jsonb", count));
  }
  for (const count of COUNTS) {
    await read(`where+sort, count=${count}`, "typed, no field index", filtered("columns", count));
  }
  const built: Record<string, number> = {};
  for (const name of ["Status", "Due"] as const) built[name] = await addIndex(admin, name);
  await admin.query(`analyze ${TYPED}`);
  for (const count of COUNTS) {
    await sameAnswers(filtered("jsonb", count), indexOrdered(count));
    await read(
      `where+sort, count=${count}`,
      "typed, Status + Due indexes",
      filtered("columns", count),
    );
  }
  for (const count of COUNTS) {
    await read(
      `where+sort, count=${count}`,
      "typed, Status + Due indexes, sort from the index",
      indexOrdered(count),
    );
  }

  for (const name of INDEXED.slice(2)) built[name] = await addIndex(admin, name);
  await admin.query(`analyze ${TYPED}`);
  const sizes = await sizesOf(admin);
  say(`sizes: ${JSON.stringify(sizes)}`);

  const writes: WriteRow[] = [];
  const write = async (label: string, target: "jsonb" | "typed") => {
    const perBatch = await insertCost(admin!, target);
    say(`insert, ${label}: ${perBatch.toFixed(1)} ms per 1000 rows`);
    writes.push({ label, perBatch });
  };
  await write("jsonb (GIN on data, (table_id, row_id), organization_id)", "jsonb");
  await write("typed, 5 field indexes", "typed");
  for (const name of INDEXED.slice(2)) await dropIndex(admin, name);
  await write("typed, 2 field indexes", "typed");
  for (const name of INDEXED.slice(0, 2)) await dropIndex(admin, name);
  await write("typed, no field index", "typed");

  const trigram = await trigramCost(admin);
  if (trigram) writes.push(trigram.write);

  process.stdout.write(
    `${report({ version, cpus, loadMs, reads, built, sizes, writes, trigram: trigram?.sizes })}\n`,
  );
} finally {
  await Promise.all(clients.map((client) => client.end()));
  await admin?.end();
  await database.drop();
}

interface Measured {
  median: number;
  p99: number;
  perSecond: number;
  count: number;
}
type Row = { label: string; storage: string; alone: number } & Measured;
interface WriteRow {
  label: string;
  perBatch: number;
}
interface Sizes {
  jsonb: { table: number; indexes: number };
  typed: { table: number; indexes: number; fixed: number; fields: Record<string, number> };
}

async function machine(client: pg.Client) {
  const { rows } = await client.query<{ version: string }>("select version()");
  const os = await import("node:os");
  return { version: rows[0]!.version.split(" on ")[0]!, cpus: os.cpus().length };
}

/** The benchmark's records (seed.ts, same generator and seed) into both storages. */
async function load(client: pg.Client) {
  const next = random(42);
  const ms = { jsonb: 0, typed: 0 };
  for (let first = 1; first <= RECORDS; first += BATCH) {
    const rows = Array.from({ length: Math.min(BATCH, RECORDS - first + 1) }, (_, i) =>
      benchRow(first + i, next),
    );
    let t = performance.now();
    await client.query(insertJsonb(rows));
    ms.jsonb += performance.now() - t;
    t = performance.now();
    await client.query(insertTyped(rows));
    ms.typed += performance.now() - t;
    if ((first - 1) % 100_000 === 0 && first > 1) say(`  loaded ${first - 1}`);
  }
  return { jsonb: Math.round(ms.jsonb), typed: Math.round(ms.typed) };
}

interface BenchRow {
  rowId: number;
  at: string;
  /** Values by field id, as the jsonb storage holds them. */
  data: Record<string, JsonValue>;
}

/** Record `rowId` of the benchmark; created one second after the one before. */
function benchRow(rowId: number, next: () => number): BenchRow {
  const values = recordData(rowId - 1, next);
  const data: Record<string, JsonValue> = {};
  for (const field of SCHEMA_FIELDS) data[field.id] = values[field.name as FieldName] as JsonValue;
  return { rowId, at: new Date(Date.UTC(2026, 0, 1) + rowId * 1000).toISOString(), data };
}

/**
 * One insert of many rows into `record` (whose trigger keeps `record_count`), the rows in one
 * jsonb parameter, as the service's batch create sends them.
 */
function insertJsonb(rows: readonly BenchRow[]): pg.QueryConfig {
  return {
    text: `insert into record (row_id, table_id, organization_id, data, created_at, updated_at, created_by, updated_by)
      select (r->>'row_id')::bigint, ${TABLE}, ${ORGANIZATION}, r->'data', (r->>'at')::timestamptz,
        (r->>'at')::timestamptz, 'system', 'system'
      from jsonb_array_elements($1::jsonb) r`,
    values: [
      JSON.stringify(rows.map((row) => ({ row_id: row.rowId, at: row.at, data: row.data }))),
    ],
  };
}

/**
 * One insert of many rows into the user table, the rows in one jsonb parameter, each value as
 * its column's JSON (`columnJson`) turned into the column's type in SQL (`columnFromJson`).
 */
function insertTyped(rows: readonly BenchRow[]): pg.QueryConfig {
  const columns = SCHEMA_FIELDS.map((field) => fieldColumn(BigInt(field.id))).join(", ");
  const values = SCHEMA_FIELDS.map((field) =>
    columnFromJson(columnTypeOf(field.type)!, `(r->'${BigInt(field.id)}')`),
  ).join(", ");
  const json = rows.map((row) => {
    const object: Record<string, JsonValue> = { row_id: row.rowId, at: row.at };
    for (const field of SCHEMA_FIELDS) {
      object[field.id] = columnJson(field, row.data[field.id] ?? null);
    }
    return object;
  });
  return {
    text: `insert into ${TYPED} (row_id, created_at, updated_at, created_by, updated_by, ${columns})
      select (r->>'row_id')::bigint, (r->>'at')::timestamptz, (r->>'at')::timestamptz, 'system', 'system', ${values}
      from jsonb_array_elements($1::jsonb) r`,
    values: [JSON.stringify(json)],
  };
}

/** A list's page as the records service reads it (`pageWithTotal`, one client's statements). */
function listPage(client: pg.Client, page: PageQuery) {
  return pageWithTotal(
    async <R extends object>(sql: string, params: readonly unknown[]) =>
      (await client.query(sql, params as unknown[])).rows as R[],
    page,
  );
}

/**
 * Both pages give the same records in the same order, the same has_more and the same total, or
 * both an estimated total (the planner's estimate of each storage's matches, which differ): the
 * estimates are kept for the report.
 */
async function sameAnswers(a: () => PageQuery, b: () => PageQuery) {
  const answer = async (page: PageQuery) => {
    const result = await listPage(clients[0]!, page);
    if (result === "over_budget") throw new Error("a page over the read budget");
    return {
      page: JSON.stringify({
        records: result.records.map((r) => [String(r.rowId), r.data]),
        total: result.estimated ? "estimated" : String(result.total),
        more: result.hasMore,
      }),
      total: String(result.total),
      estimated: result.estimated,
    };
  };
  const [left, right] = [await answer(a()), await answer(b())];
  if (left.page !== right.page) {
    throw new Error(
      `the storages answer differently:\n${left.page.slice(0, 300)}\n${right.page.slice(0, 300)}`,
    );
  }
  totals.push(
    left.estimated
      ? `estimated ${left.total} (jsonb) and ${right.total} (typed)`
      : `${left.total === "null" ? "none" : left.total}`,
  );
}

/**
 * The page statement's plan, run once from one client while nothing else runs: PostgreSQL's
 * execution time (the best of three), and the plan's text.
 */
async function explain(page: PageQuery): Promise<{ ms: number; text: string }> {
  const { sql, params } = pageStatement(page);
  let best = Number.POSITIVE_INFINITY;
  let text = "";
  for (let i = 0; i < 3; i++) {
    const { rows } = await clients[0]!.query<{ "QUERY PLAN": string }>(
      `explain (analyze, buffers) ${sql}`,
      params,
    );
    const lines = rows.map((row) => row["QUERY PLAN"]);
    const time = Number(/Execution Time: ([\d.]+)/.exec(lines.at(-1) ?? "")?.[1]);
    if (time < best) [best, text] = [time, lines.join("\n")];
  }
  return { ms: best, text };
}

/**
 * Every client runs `op` in a loop: a warm-up, then SECONDS measured. Latencies are those of the
 * operations started in the measured window; the rate counts them over the time until the last
 * one ended.
 */
async function measure(op: (client: pg.Client) => Promise<unknown>): Promise<Measured> {
  const latencies: number[] = [];
  const warmEnd = performance.now() + WARM_UP_SECONDS * 1000;
  const end = warmEnd + SECONDS * 1000;
  let last = warmEnd;
  await Promise.all(
    clients.map(async (client) => {
      for (let t = performance.now(); t < end; t = performance.now()) {
        await op(client);
        const done = performance.now();
        if (t >= warmEnd) {
          latencies.push(done - t);
          last = Math.max(last, done);
        }
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    median: at(0.5),
    p99: at(0.99),
    perSecond: latencies.length / ((last - warmEnd) / 1000),
    count: latencies.length,
  };
}

/** A btree on a field's column, built as the policy would build it; its build time in ms. */
async function addIndex(client: pg.Client, name: FieldName): Promise<number> {
  const t = performance.now();
  await client.query(`create index concurrently ${indexName(name)} on ${TYPED} (${column(name)})`);
  const ms = Math.round(performance.now() - t);
  say(`create index concurrently on ${name}: ${ms} ms`);
  return ms;
}

async function dropIndex(client: pg.Client, name: FieldName) {
  await client.query(`drop index ${TYPED.split(".")[0]}.${indexName(name)}`);
}

function indexName(name: FieldName) {
  return userTableIndex(TABLE, name.toLowerCase());
}

async function sizesOf(client: pg.Client): Promise<Sizes> {
  const size = async (sql: string) =>
    Number((await client.query<{ n: string }>(`select (${sql})::bigint as n`)).rows[0]!.n);
  const fields: Record<string, number> = {};
  for (const name of INDEXED) {
    fields[name] = await size(`pg_relation_size('${TYPED.split(".")[0]}.${indexName(name)}')`);
  }
  const fixed =
    (await size(`pg_relation_size('${TYPED.split(".")[0]}.${userTableIndex(TABLE, "created")}')`)) +
    (await size(`pg_relation_size('${TYPED.split(".")[0]}.${userTableIndex(TABLE, "updated")}')`)) +
    (await size(
      `select sum(pg_relation_size(indexrelid)) from pg_index where indrelid = '${TYPED}'::regclass and indisprimary`,
    ));
  return {
    jsonb: {
      table: await size("pg_table_size('record')"),
      indexes: await size("pg_indexes_size('record')"),
    },
    typed: {
      table: await size(`pg_table_size('${TYPED}')`),
      indexes: await size(`pg_indexes_size('${TYPED}')`),
      fixed,
      fields,
    },
  };
}

/**
 * Milliseconds per insert of BATCH rows, WRITE_ROWS rows in all, from one client, with the
 * table's current indexes; the rows are deleted and vacuumed away again after each of three
 * repetitions, and the median repetition counts.
 */
async function insertCost(client: pg.Client, target: "jsonb" | "typed"): Promise<number> {
  const repetitions: number[] = [];
  for (let repetition = 0; repetition < 3; repetition++) {
    const next = random(7 + repetition);
    let ms = 0;
    for (let first = RECORDS + 1; first <= RECORDS + WRITE_ROWS; first += BATCH) {
      const rows = Array.from({ length: BATCH }, (_, i) => benchRow(first + i, next));
      const statement = target === "jsonb" ? insertJsonb(rows) : insertTyped(rows);
      const t = performance.now();
      await client.query(statement);
      ms += performance.now() - t;
    }
    repetitions.push(ms / (WRITE_ROWS / BATCH));
    const relation = target === "jsonb" ? "record" : TYPED;
    await client.query(`delete from ${relation} where row_id > $1`, [RECORDS]);
    await client.query(`vacuum ${relation}`);
  }
  return repetitions.sort((a, b) => a - b)[1]!;
}

/**
 * A trigram index (pg_trgm, GIN) on the two text fields, Name and Notes, on the typed table
 * without its btrees: its size and its insert cost. Skipped where pg_trgm is not installed.
 */
async function trigramCost(client: pg.Client) {
  const { rows } = await client.query(
    "select 1 from pg_available_extensions where name = 'pg_trgm'",
  );
  if (rows.length === 0) {
    say("pg_trgm is not available: no trigram measurement");
    return undefined;
  }
  await client.query("create extension if not exists pg_trgm schema public");
  const sizes: Record<string, { bytes: number; buildMs: number }> = {};
  for (const name of ["Name", "Notes"] as const) {
    const index = `${indexName(name)}_trgm`;
    const t = performance.now();
    await client.query(
      `create index concurrently ${index} on ${TYPED} using gin (${column(name)} public.gin_trgm_ops)`,
    );
    const buildMs = Math.round(performance.now() - t);
    const bytes = Number(
      (
        await client.query<{ n: string }>(
          `select pg_relation_size('${TYPED.split(".")[0]}.${index}') as n`,
        )
      ).rows[0]!.n,
    );
    sizes[name] = { bytes, buildMs };
    say(`trigram index on ${name}: ${mib(bytes)} MiB, built in ${buildMs} ms`);
  }
  const perBatch = await insertCost(client, "typed");
  say(`insert, typed with trigram indexes on Name and Notes: ${perBatch.toFixed(1)} ms`);
  return {
    sizes,
    write: { label: "typed, trigram (GIN) indexes on Name and Notes, no btree", perBatch },
  };
}

function mib(bytes: number) {
  return (bytes / 1024 / 1024).toFixed(1);
}

function ms(value: number) {
  return value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

function fmt(m: Measured) {
  return `${m.perSecond.toFixed(1)} pages/s, median ${ms(m.median)} ms, p99 ${ms(m.p99)} ms (${m.count})`;
}

function report(r: {
  version: string;
  cpus: number;
  loadMs: { jsonb: number; typed: number };
  reads: Row[];
  built: Record<string, number>;
  sizes: Sizes;
  writes: WriteRow[];
  trigram?: Record<string, { bytes: number; buildMs: number }>;
}): string {
  const lines = [
    "",
    `## typed storage at ${RECORDS.toLocaleString("en")} records (${new Date().toISOString().slice(0, 16)} UTC)`,
    "",
    `${r.version}, ${r.cpus} cores; ${CLIENTS} clients, ${SECONDS} s per line after ${WARM_UP_SECONDS} s of warm-up.`,
    `Totals of the compared pages: ${[...new Set(totals)].join("; ")}.`,
    `Load (inserts of ${BATCH} rows): jsonb ${(r.loadMs.jsonb / 1000).toFixed(1)} s, typed ${(r.loadMs.typed / 1000).toFixed(1)} s.`,
    "",
    "| page | storage | pages/s | median ms | p99 ms | PostgreSQL alone, ms |",
    "|---|---|---:|---:|---:|---:|",
    ...r.reads.map(
      (row) =>
        `| ${row.label} | ${row.storage} | ${row.perSecond.toFixed(1)} | ${ms(row.median)} | ${ms(row.p99)} | ${ms(row.alone)} |`,
    ),
    "",
    "| insert of 1000 rows into | ms |",
    "|---|---:|",
    ...r.writes.map((row) => `| ${row.label} | ${row.perBatch.toFixed(1)} |`),
    "",
    "| relation | MiB | of the table |",
    "|---|---:|---:|",
    `| jsonb: record (this table's rows only) | ${mib(r.sizes.jsonb.table)} | |`,
    `| jsonb: its indexes | ${mib(r.sizes.jsonb.indexes)} | ${(r.sizes.jsonb.indexes / r.sizes.jsonb.table).toFixed(2)} |`,
    `| typed: table | ${mib(r.sizes.typed.table)} | |`,
    `| typed: primary key + created/updated indexes | ${mib(r.sizes.typed.fixed)} | ${(r.sizes.typed.fixed / r.sizes.typed.table).toFixed(2)} |`,
    ...Object.entries(r.sizes.typed.fields).map(
      ([name, bytes]) =>
        `| typed: btree on ${name} (built in ${r.built[name]} ms) | ${mib(bytes)} | ${(bytes / r.sizes.typed.table).toFixed(2)} |`,
    ),
    `| typed: all indexes, with the 5 field btrees | ${mib(r.sizes.typed.indexes)} | ${(r.sizes.typed.indexes / r.sizes.typed.table).toFixed(2)} |`,
    ...Object.entries(r.trigram ?? {}).map(
      ([name, t]) =>
        `| typed: trigram GIN on ${name} (built in ${t.buildMs} ms) | ${mib(t.bytes)} | ${(t.bytes / r.sizes.typed.table).toFixed(2)} |`,
    ),
    "",
    `Total ${((Date.now() - started) / 1000).toFixed(0)} s.`,
  ];
  return lines.join("\n");
}
