import { parseArgs } from "node:util";
import pg from "pg";
import { startLocalSystem } from "./local-system.js";
import { Api, seedTenant } from "./seed.js";

/**
 * A type change through the real route on a large table, with writes and reads of the table
 * going on: Rowbase as Kubernetes runs it (`startLocalSystem`: a process per service), a table
 * whose text field `Code` holds numbers in N records (filled with SQL, as the bench's seeding
 * through the API would take minutes), then POST /field/update `{"type": "number"}` timed,
 * while writers update random records (PATCH) and readers read random records by id through
 * the gateway. Reports the change's status and time, and the writes' and reads' statuses and
 * latencies through it: a write that arrives during the conversion is refused at once, 503 with
 * Retry-After (docs/records-storage.md, "Locks"). Not part of `npm test`;
 * README.md ("Decisions worth knowing", the type change paragraph) holds its figures.
 *
 *   npm run build && npx tsx test/bench/type-change-route.ts [--records N] [--writers W]
 *     [--readers R] [--source]
 */

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "1000000" },
    writers: { type: "string", default: "2" },
    readers: { type: "string", default: "2" },
    source: { type: "boolean", default: false },
  },
});
const RECORDS = Number(args.records);
const WRITERS = Number(args.writers);
const READERS = Number(args.readers);
if (!(RECORDS >= 1000 && WRITERS >= 0 && READERS >= 0)) {
  throw new Error("--records (at least 1000), --writers and --readers must be positive numbers");
}

const say = (line: string) => process.stdout.write(`${line}\n`);

/** Latencies of one kind of call by status, in milliseconds. */
class Calls {
  private readonly byStatus = new Map<number, number[]>();
  add(status: number, ms: number) {
    const all = this.byStatus.get(status) ?? [];
    all.push(ms);
    this.byStatus.set(status, all);
  }
  summary() {
    return Object.fromEntries(
      [...this.byStatus].map(([status, all]) => {
        const sorted = [...all].sort((a, b) => a - b);
        const at = (q: number) =>
          Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!);
        return [status, { calls: sorted.length, p50: at(0.5), p99: at(0.99), max: at(1) }];
      }),
    );
  }
}

async function main() {
  const system = await startLocalSystem({ source: args.source, logLevel: "warn", say });
  const db = new pg.Client({ connectionString: system.databaseUrl });
  try {
    await db.connect();
    const api = new Api(system.baseUrl);
    const tenant = await seedTenant(api, {
      records: 0,
      mail: system.mail,
      admin: {
        organizationUrl: system.organizationGrpcUrl,
        internalSecret: system.internalJwtSecret,
      },
      say,
    });
    const { field } = await api.call<{ field: { field_id: number } }>("POST", "/field/create", {
      token: tenant.sessionToken,
      query: { table_id: tenant.tableId },
      body: { name: "Code", type: "text" },
    });
    const table = `org_${tenant.organizationId}.t_${tenant.tableId}`;
    const loading = performance.now();
    await db.query(
      `insert into ${table} (row_id, created_by, updated_by, f_${tenant.fieldIds.Name}, f_${field.field_id})
       select nextval('records.row_id_seq'), 'system', 'system', 'name ' || g, (g % 100000)::text
       from generate_series(1, $1::int) g`,
      [RECORDS],
    );
    await db.query(`vacuum analyze ${table}`);
    const { rows } = await db.query<{ first: string; last: string }>(
      `select min(row_id)::text as first, max(row_id)::text as last from ${table}`,
    );
    const first = Number(rows[0]!.first);
    const span = Number(rows[0]!.last) - first + 1;
    say(`  ${RECORDS} records loaded in ${Math.round(performance.now() - loading)} ms`);

    const path = `/public/v1/databases/${tenant.databaseId}/tables/${tenant.tableId}/records`;
    const randomRow = () => first + Math.floor(Math.random() * span);
    const call = async (into: Calls, method: string, body?: unknown) => {
      const started = performance.now();
      const response = await fetch(`${system.baseUrl}${path}/${randomRow()}`, {
        method,
        headers: {
          authorization: `Bearer ${tenant.apiToken}`,
          ...(body ? { "content-type": "application/json" } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      await response.arrayBuffer();
      into.add(response.status, performance.now() - started);
    };
    let running = true;
    let writes = new Calls();
    let reads = new Calls();
    const writer = async () => {
      while (running) await call(writes, "PATCH", { data: { Name: `changed ${Date.now()}` } });
    };
    const reader = async () => {
      while (running) await call(reads, "GET");
    };
    const load = [
      ...Array.from({ length: WRITERS }, writer),
      ...Array.from({ length: READERS }, reader),
    ];
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const before = { writes: writes.summary(), reads: reads.summary() };
    writes = new Calls();
    reads = new Calls();
    const started = performance.now();
    const change = await fetch(`${system.baseUrl}/field/update?field_id=${field.field_id}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${tenant.sessionToken}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ type: "number" }),
    });
    const answer = await change.text();
    const took = Math.round(performance.now() - started);
    running = false;
    await Promise.all(load);
    const [converted] = (
      await db.query<{ n: string }>(
        `select count(*)::text as n from ${table} where f_${field.field_id} is not null`,
      )
    ).rows;
    say(
      JSON.stringify(
        {
          records: RECORDS,
          change: "text -> number through POST /field/update",
          status: change.status,
          answer: answer.slice(0, 300),
          took_ms: took,
          values_after: Number(converted?.n),
          before_change: before,
          through_the_change: { writes: writes.summary(), reads: reads.summary() },
        },
        null,
        2,
      ),
    );
  } finally {
    await db.end().catch(() => {});
    await system.stop({ keepLogs: false });
  }
}

await main();
