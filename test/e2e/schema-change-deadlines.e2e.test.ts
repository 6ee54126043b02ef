import { setTimeout as sleep } from "node:timers/promises";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  list,
  RECORD_TEST_RATE_LIMITS,
  seed,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * A type change converts the table before its route answers, and takes as long as that needs
 * (SCHEMA_CHANGE_TIMEOUT_SECONDS), past the ordinary deadlines (catalog's 8 s for a service, the
 * gateway's 10 s); past its own deadline it rolls back whole and answers 503. Meanwhile a write
 * of the table is refused at once, 503 with Retry-After, and never stored later; reads answer
 * as usual.
 *
 * The conversion is made slow on purpose, on a table of a few records: a row trigger on the
 * user table waits for an advisory lock the test holds, so the conversion's first row stalls
 * (holding the table's locks, as a long conversion does) until the test lets go. A write
 * reaches its rows only past those locks, so the trigger holds up the conversion alone.
 */

/** The advisory lock the stalling trigger waits for (classid 0, objid this). */
const STALL_KEY = 734_215;

interface Stalled {
  table: TestTable;
  rowIds: number[];
  /** The session holding STALL_KEY; `release` lets the conversion go on. */
  release(): Promise<void>;
}

class SchemaChangeSystem {
  sys!: TestSystem;
  api!: ReturnType<typeof client>;
  tenant!: Tenant;
  db!: pg.Client;

  async start(env: Record<string, string>): Promise<void> {
    this.sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS, ...env });
    this.api = client(this.sys.baseUrl);
    this.tenant = await createTenant(this.sys, this.api, { plan: "business" });
    this.db = new pg.Client({ connectionString: this.sys.databaseUrl });
    await this.db.connect();
  }

  async stop(): Promise<void> {
    await this.db?.end();
    await this.sys?.stop();
  }

  /** A table of three records whose next conversion stalls until `release`. */
  async stalledTable(): Promise<Stalled> {
    const table = await createTable(this.api, this.tenant, [
      { name: "Name", type: "text" },
      { name: "Amount", type: "text" },
    ]);
    const records = await seed(this.api, this.tenant.writeToken, table, [
      { Name: "a", Amount: "1" },
      { Name: "b", Amount: "2" },
      { Name: "c", Amount: "3" },
    ]);
    // records' user table (services/records/src/db/user-tables/names.ts).
    const relation = `org_${this.tenant.orgId}.t_${table.tableId}`;
    const fn = `org_${this.tenant.orgId}.stall_${table.tableId}`;
    await this.db.query(
      `create function ${fn}() returns trigger language plpgsql as $$
       begin perform pg_advisory_xact_lock_shared(${STALL_KEY}); return new; end $$`,
    );
    await this.db.query(
      `create trigger stall before update on ${relation} for each row execute function ${fn}()`,
    );
    const holder = new pg.Client({ connectionString: this.sys.databaseUrl });
    await holder.connect();
    await holder.query("select pg_advisory_lock($1)", [STALL_KEY]);
    return {
      table,
      rowIds: records.map((record) => record.row_id as number),
      release: async () => {
        await holder.query("select pg_advisory_unlock($1)", [STALL_KEY]);
        await holder.end();
      },
    };
  }

  /** Waits until a conversion is held up by the trigger (its session waits for STALL_KEY). */
  async untilStalled(): Promise<void> {
    for (let attempt = 0; attempt < 400; attempt++) {
      const { rows } = await this.db.query<{ waiting: number }>(
        `select count(*)::int as waiting from pg_locks
         where locktype = 'advisory' and classid = 0 and objid = $1 and not granted`,
        [STALL_KEY],
      );
      if (rows[0]!.waiting > 0) return;
      await sleep(50);
    }
    throw new Error("the conversion never reached the stalling trigger");
  }

  changeType(table: TestTable, type: string) {
    return this.api("POST", "/field/update", {
      token: this.tenant.owner.token,
      query: q({ field_id: table.f.Amount!.field_id }),
      body: { type },
    });
  }

  /** The table's columns, for what a conversion leaves behind. */
  async columns(table: TestTable): Promise<string[]> {
    const { rows } = await this.db.query<{ name: string }>(
      `select attname as name from pg_attribute
       where attrelid = $1::regclass and attnum > 0 and not attisdropped order by 1`,
      [`org_${this.tenant.orgId}.t_${table.tableId}`],
    );
    return rows.map((row) => row.name);
  }
}

/** The table's records' values by name, in row order. */
async function values(s: SchemaChangeSystem, table: TestTable) {
  const { records } = await list(s.api, s.tenant.readToken, table);
  return records.sort((a, b) => Number(a.row_id) - Number(b.row_id)).map((record) => record.data);
}

describe("a type change longer than the ordinary deadlines", () => {
  const s = new SchemaChangeSystem();
  beforeAll(() => s.start({}));
  afterAll(() => s.stop());

  it("answers once converted; writes meanwhile are refused and never stored, reads go on", async () => {
    const { table, rowIds, release } = await s.stalledTable();
    const routes = v1(table.databaseId, table.tableId);
    const started = Date.now();
    const change = s.changeType(table, "number");
    try {
      await s.untilStalled();

      // Reads take no lock the conversion holds: they answer, with the values as they were.
      const read = await s.api("GET", routes.record(rowIds[0]!), {
        token: s.tenant.readToken,
        query: { response_format: "names" },
      });
      expect(read.status, JSON.stringify(read.body)).toBe(200);
      expect(read.body.data.record.data).toMatchObject({ Name: "a", Amount: "1" });
      const listed = await list(s.api, s.tenant.readToken, table);
      expect(listed.total).toBe(3);

      // Writes and deletes are refused while the table is converted (one waiting for the
      // conversion would hold a lock its swap needs, and land after its client gave up), told
      // when to come back, and never applied later.
      const created = await s.api("POST", routes.records, {
        token: s.tenant.writeToken,
        body: { data: { Name: "late", Amount: "4" } },
      });
      const updated = await s.api("PATCH", routes.record(rowIds[1]!), {
        token: s.tenant.writeToken,
        body: { data: { Name: "changed" } },
      });
      const deleted = await s.api("DELETE", routes.record(rowIds[2]!), {
        token: s.tenant.writeToken,
      });
      const batchDeleted = await s.api("POST", routes.batchDelete, {
        token: s.tenant.writeToken,
        body: { row_ids: [rowIds[0], rowIds[2]] },
      });
      for (const refused of [created, updated, deleted, batchDeleted]) {
        expect(refused.status, JSON.stringify(refused.body)).toBe(503);
        expect(refused.body).toEqual({ message: "service_unavailable", data: {} });
        expect(refused.headers.get("retry-after")).toBe("5");
      }

      // Held past the gateway's ordinary 10 s (and catalog's 8 s wait for a service).
      await sleep(Math.max(0, 10_500 - (Date.now() - started)));
    } finally {
      await release();
    }
    const answered = await change;
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    expect(answered.body.data.field).toMatchObject({ name: "Amount", type: "number" });

    // Converted, and the refused writes were not applied after the conversion let them go.
    expect(await values(s, table)).toEqual([
      { Name: "a", Amount: 1 },
      { Name: "b", Amount: 2 },
      { Name: "c", Amount: 3 },
    ]);
    const written = await s.api("POST", routes.records, {
      token: s.tenant.writeToken,
      body: { data: { Name: "d", Amount: 4 } },
    });
    expect(written.status, JSON.stringify(written.body)).toBe(200);
  });
});

describe("a type change past SCHEMA_CHANGE_TIMEOUT_SECONDS", () => {
  const s = new SchemaChangeSystem();
  beforeAll(() => s.start({ SCHEMA_CHANGE_TIMEOUT_SECONDS: "2" }));
  afterAll(() => s.stop());

  it("answers 503 and leaves the field, its values and the table as they were", async () => {
    const { table, release } = await s.stalledTable();
    const columns = await s.columns(table);
    const change = s.changeType(table, "number");
    let answered: Awaited<typeof change>;
    try {
      await s.untilStalled();
      answered = await change;
    } finally {
      await release();
    }
    expect(answered.status, JSON.stringify(answered.body)).toBe(503);
    expect(answered.body).toEqual({ message: "service_unavailable", data: {} });

    // The conversion, let go, sees its deadline passed and rolls back: nothing changed anywhere.
    // Its rollback may follow the answer by a moment; a write after it goes through.
    let written: Awaited<ReturnType<typeof s.api>> | undefined;
    for (let attempt = 0; attempt < 100 && written?.status !== 200; attempt++) {
      if (attempt > 0) await sleep(100);
      written = await s.api("POST", v1(table.databaseId, table.tableId).records, {
        token: s.tenant.writeToken,
        body: { data: { Name: "d", Amount: "4" } },
      });
    }
    expect(written!.status, JSON.stringify(written!.body)).toBe(200);
    const fields = await s.api("GET", "/field/list", {
      token: s.tenant.owner.token,
      query: q({ table_id: table.tableId }),
    });
    expect(
      fields.body.data.fields.find((f: { name: string }) => f.name === "Amount"),
    ).toMatchObject({ type: "text" });
    expect(await values(s, table)).toEqual([
      { Name: "a", Amount: "1" },
      { Name: "b", Amount: "2" },
      { Name: "c", Amount: "3" },
      { Name: "d", Amount: "4" },
    ]);
    expect(await s.columns(table)).toEqual(columns);
  });
});
