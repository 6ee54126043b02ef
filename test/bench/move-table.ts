import { parseArgs } from "node:util";
import type { JsonValue } from "@bufbuild/protobuf";
import { createTestDatabase, testInfra } from "@rowbase/kit/testing";
import { createRecordsOrm, migrateRecords } from "@rowbase/records";
import { moveTable } from "@rowbase/records/statements";
import pg from "pg";
import { SCHEMA_FIELDS } from "./bench-fields.js";
import { type FieldName, random, recordData } from "./seed.js";

/**
 * How long the upgrade's move of one table out of `record` into its own table holds that
 * table's writes (`moveTable`, which holds the table's write lock for the whole move): the
 * benchmark's table (8 fields, seed.ts's records) loaded into `record`, then moved while one
 * write of the table waits on the lock from the move's start, and writes of another table run
 * on. Not part of `npm test`; see README.md ("The upgrade's move").
 *
 *   npx tsx test/bench/move-table.ts [--records N]
 */

const { values: args } = parseArgs({
  options: { records: { type: "string", default: "100000" } },
});
const RECORDS = Number(args.records);
if (!(RECORDS >= 1000)) throw new Error("--records must be at least 1000");
const BATCH = 1000;
const ORGANIZATION = 1n;
const TABLE = 1n;
const OTHER = 2n;

const started = Date.now();
const say = (line: string) =>
  process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}\n`);

const database = await createTestDatabase((await testInfra()).databaseUrl);
const connect = async () => {
  const client = new pg.Client({
    connectionString: database.url,
    options: "-c search_path=records -c statement_timeout=600000",
  });
  await client.connect();
  return client;
};
const clients: pg.Client[] = [];
let orm: Awaited<ReturnType<typeof createRecordsOrm>> | undefined;
try {
  await migrateRecords(database.url);
  orm = await createRecordsOrm(database.url);
  const [admin, waiter, other] = await Promise.all([connect(), connect(), connect()]);
  clients.push(admin, waiter, other);

  const next = random(42);
  for (let first = 1; first <= RECORDS; first += BATCH) {
    const rows = Array.from({ length: Math.min(BATCH, RECORDS - first + 1) }, (_, i) => {
      const values = recordData(first + i - 1, next);
      const data: Record<string, JsonValue> = {};
      for (const f of SCHEMA_FIELDS) data[f.id] = values[f.name as FieldName] as JsonValue;
      return { row_id: first + i, data };
    });
    await admin.query(
      `insert into record (row_id, table_id, organization_id, data, created_by, updated_by)
       select (r->>'row_id')::bigint, $2, $3, r->'data', 'system', 'system'
       from jsonb_array_elements($1::jsonb) r`,
      [JSON.stringify(rows), TABLE, ORGANIZATION],
    );
  }
  // Another table's records, which its writes update while the move runs.
  await admin.query(
    `insert into record (row_id, table_id, organization_id, data, created_by, updated_by)
     select $1::bigint + n, $2, $3, '{}', 'system', 'system' from generate_series(1, 1000) n`,
    [RECORDS, OTHER, ORGANIZATION],
  );
  await admin.query("vacuum analyze record");
  say(`loaded ${RECORDS} records`);

  // The move, and once it holds the table's lock, a write of the table (the shared lock every
  // create and update takes) that waits for it.
  const moveStarted = performance.now();
  const move = moveTable(orm.em.fork(), {
    organizationId: ORGANIZATION,
    tableId: TABLE,
    fields: SCHEMA_FIELDS,
  }).then((outcome) => ({ outcome, ms: performance.now() - moveStarted }));
  for (;;) {
    const held = await admin.query(
      "select 1 from pg_locks where locktype = 'advisory' and mode = 'ExclusiveLock' and granted and database = (select oid from pg_database where datname = current_database())",
    );
    if (held.rowCount) break;
  }
  const lockHeldAfter = performance.now() - moveStarted;
  const waitStarted = performance.now();
  const waited = (async () => {
    await waiter.query("begin");
    await waiter.query("select pg_advisory_xact_lock_shared(hashtextextended($1, 0))", [
      `records.table:${TABLE}`,
    ]);
    await waiter.query("commit");
    return performance.now() - waitStarted;
  })();
  // Updates of the other table, one after the other, until the move is done.
  let done = false;
  const otherWrites: number[] = [];
  const othersRun = (async () => {
    let n = 0;
    while (!done) {
      const t = performance.now();
      await other.query(
        `update record set data = jsonb_build_object('n', $3::int), updated_at = now()
         where table_id = $1 and row_id = $2::bigint + 1 + $3::int % 1000`,
        [OTHER, RECORDS, n++],
      );
      otherWrites.push(performance.now() - t);
    }
  })();
  const moved = await move;
  done = true;
  const [writeWaited] = await Promise.all([waited, othersRun]);
  otherWrites.sort((a, b) => a - b);
  say(`moved: ${JSON.stringify(moved.outcome)} in ${moved.ms.toFixed(0)} ms`);
  say(`the move held the table's lock ${lockHeldAfter.toFixed(0)} ms after it started`);
  say(`a write of the table waited ${writeWaited.toFixed(0)} ms`);
  say(
    `${otherWrites.length} updates of another table meanwhile: median ${otherWrites[Math.floor(otherWrites.length / 2)]?.toFixed(1)} ms, max ${otherWrites.at(-1)?.toFixed(1)} ms`,
  );
} finally {
  await Promise.all(clients.map((client) => client.end()));
  await orm?.close();
  await database.drop();
}
