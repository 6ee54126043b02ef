import { parseArgs } from "node:util";
import { createTestDatabase, testInfra } from "@rowbase/kit/testing";
import { createRecordsOrm, migrateRecords } from "@rowbase/records";
import { changeFieldType, createTableSql, userTable } from "@rowbase/records/statements";
import pg from "pg";

/**
 * How long a type change holds up a user table's writes, and whether it holds up its reads: a
 * table of N records (a text field holding numbers, and a number field), then a text → number
 * change as records makes it for catalog's check (`changeFieldType` keeping the previous
 * values), while writers update random records as the record routes do (the table's write lock
 * taken shared, then the row) and readers read random records by id. Not part of `npm test`;
 * README.md ("Decisions worth knowing": the type change paragraph holds its figures).
 *
 *   npx tsx --conditions=@rowbase/source test/bench/type-change-wait.ts [--records N]
 *     [--writers W] [--readers R]
 */

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "1000000" },
    writers: { type: "string", default: "4" },
    readers: { type: "string", default: "4" },
  },
});
const RECORDS = Number(args.records);
const WRITERS = Number(args.writers);
const READERS = Number(args.readers);
if (!(RECORDS >= 1000 && WRITERS >= 1 && READERS >= 0)) {
  throw new Error("--records (at least 1000), --writers and --readers must be positive numbers");
}

const ORGANIZATION = 1n;
const TABLE = 1n;
const CODE = { id: 11n, type: "text" as const, options: {} };
const AMOUNT = { id: 12n, type: "number" as const, options: { decimals: 0 } };

/** Latencies of one kind of call, in milliseconds. */
class Latencies {
  private readonly all: number[] = [];
  add(ms: number) {
    this.all.push(ms);
  }
  summary() {
    const sorted = [...this.all].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    return {
      calls: sorted.length,
      p50: round(at(0.5)),
      p99: round(at(0.99)),
      max: round(sorted.at(-1)),
    };
  }
}

const round = (ms: number | undefined) => (ms === undefined ? undefined : Math.round(ms));
const randomRow = () => 1 + Math.floor(Math.random() * RECORDS);

async function main() {
  const infra = await testInfra();
  const db = await createTestDatabase(infra.databaseUrl);
  const pool = new pg.Pool({
    connectionString: db.url,
    max: WRITERS + READERS + 1,
    options: "-c search_path=records",
  });
  // Dropping the database at the end ends the pool's last connections, maybe before they close.
  pool.on("error", () => {});
  const orm = await createRecordsOrm(db.url);
  try {
    await migrateRecords(db.url);
    const table = userTable(ORGANIZATION, TABLE);
    for (const sql of createTableSql(ORGANIZATION, TABLE, [CODE, AMOUNT])) await pool.query(sql);
    const loaded = performance.now();
    await pool.query(
      `insert into ${table} (row_id, created_by, updated_by, f_11, f_12)
       select g, 'system', 'system', (g % 100000)::text, g from generate_series(1, $1::int) g`,
      [RECORDS],
    );
    await pool.query(`vacuum analyze ${table}`);
    process.stdout.write(
      `${RECORDS} records loaded in ${Math.round(performance.now() - loaded)} ms\n`,
    );

    let running = true;
    let writes = new Latencies();
    let reads = new Latencies();
    const writer = async () => {
      const client = await pool.connect();
      try {
        while (running) {
          const started = performance.now();
          await client.query("begin");
          await client.query("select pg_advisory_xact_lock_shared(hashtextextended($1, 0))", [
            `records.table:${TABLE}`,
          ]);
          await client.query(`update ${table} set f_12 = f_12 + 1 where row_id = $1`, [
            randomRow(),
          ]);
          await client.query("commit");
          writes.add(performance.now() - started);
        }
      } finally {
        client.release();
      }
    };
    const reader = async () => {
      while (running) {
        const started = performance.now();
        await pool.query(`select * from ${table} where row_id = $1`, [randomRow()]);
        reads.add(performance.now() - started);
      }
    };
    const load = [
      ...Array.from({ length: WRITERS }, writer),
      ...Array.from({ length: READERS }, reader),
    ];
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const before = { writes: writes.summary(), reads: reads.summary() };
    writes = new Latencies();
    reads = new Latencies();
    const started = performance.now();
    const result = await changeFieldType(
      orm.em.fork(),
      {
        organizationId: ORGANIZATION,
        tableId: TABLE,
        from: CODE,
        to: { id: CODE.id, type: "number", options: { decimals: 0 } },
        required: "none",
      },
      { keepPrevious: true },
    );
    const took = Math.round(performance.now() - started);
    running = false;
    await Promise.all(load);
    process.stdout.write(
      `${JSON.stringify(
        {
          records: RECORDS,
          change: "text -> number, keeping the previous values",
          result,
          took_ms: took,
          before_change: before,
          through_the_change: { writes: writes.summary(), reads: reads.summary() },
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    await orm.close();
    await pool.end();
    await db.drop();
  }
}

await main();
