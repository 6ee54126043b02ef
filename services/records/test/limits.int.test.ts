import { Code, cachePlan, planCacheKey, versionedEntryOf } from "@rowbase/kit";
import { holdAnswers } from "@rowbase/kit/testing";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { PlanName } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { PoolClient } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fieldColumn, userTable } from "../src/db/user-tables/names.js";
import { Plans } from "../src/plans.js";
import {
  as,
  createTable,
  def,
  eventually,
  failureOf,
  type Harness,
  OPERATOR,
  SECRET,
  SERVICE,
  startHarness,
  type TestTable,
  type TestUser,
  validationOf,
} from "./harness.js";
import { NEXT_ROW_ID, storedCount, storedRows } from "./stored.js";

// The plan's record limit: counted in the same statement or
// transaction as the insert, so that parallel creates never overshoot it.

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

async function organizationOf(owner: TestUser): Promise<bigint> {
  const { organization } = await h.org.createOrganization(
    { name: "Limited", organizationSlug: "" },
    await as(owner),
  );
  return organization!.organizationId;
}

function enterprise(records: bigint) {
  return {
    records,
    apiCallsPerMonth: 1_000_000n,
    fileStorageBytes: 1_000_000_000n,
    transferBytesPerMonth: 1_000_000_000n,
    members: 10n,
    maxFileBytes: 1_000_000n,
  };
}

async function countOf(organizationId: bigint): Promise<{ rows: number; usage: bigint }> {
  const rows = await storedCount(h, organizationId);
  const usage = await h.records.getRecordUsage({ organizationId }, await as(SERVICE));
  return { rows, usage: usage.records };
}

async function outboxRows(): Promise<number> {
  const { rows } = await h.db.query("select count(*)::int as n from records.outbox");
  return rows[0].n;
}

// A table without an autonumber field is created into in one statement (create_gate), one with
// an autonumber field in a transaction: both count the same way.
describe.each([
  ["one statement", [def("Name", FieldType.TEXT)]],
  ["a transaction", [def("Name", FieldType.TEXT), def("Seq", FieldType.AUTONUMBER)]],
])("the record limit, creating in %s", (_, fields) => {
  let owner: TestUser;
  let organizationId: bigint;
  let table: TestTable;

  beforeAll(async () => {
    owner = await h.user("Limited owner");
    organizationId = await organizationOf(owner);
    await h.org.setPlan(
      { organizationId, plan: PlanName.ENTERPRISE, enterpriseLimits: enterprise(20n) },
      await as(OPERATOR),
    );
    table = await createTable(h, owner, organizationId, fields);
  });

  it("lets exactly one of 64 parallel creates at limit-1 through", async () => {
    const call = await as(owner);
    await h.records.batchCreateRecords(
      { tableId: table.tableId, records: Array.from({ length: 19 }, () => ({ data: {} })) },
      call,
    );
    const results = await Promise.allSettled(
      Array.from({ length: 64 }, (_, i) =>
        h.records.createRecord({ tableId: table.tableId, data: { Name: `p${i}` } }, call),
      ),
    );
    const created = results.filter((r) => r.status === "fulfilled");
    expect(created).toHaveLength(1);
    for (const result of results) {
      if (result.status === "rejected") {
        const failure = await failureOf(Promise.reject(result.reason));
        expect(failure).toMatchObject({
          code: Code.ResourceExhausted,
          reason: "record_limit_exceeded",
        });
      }
    }
    expect(await countOf(organizationId)).toEqual({ rows: 20, usage: 20n });
    const limits = await h.org.getLimits({ organizationId }, call);
    expect(limits.usage!.records).toBe(20n);
    expect(limits.limits!.records).toBe(20n);
  });

  it("refuses a batch that would pass the limit as a whole, writing nothing", async () => {
    const call = await as(owner);
    const rows = await h.records.listRecords({ tableId: table.tableId, limit: 1000 }, call);
    await h.records.batchDeleteRecords(
      { tableId: table.tableId, rowIds: rows.records.slice(0, 2).map((r) => r.rowId) },
      call,
    );
    expect(await countOf(organizationId)).toEqual({ rows: 18, usage: 18n });
    const queued = await outboxRows();
    const failure = await failureOf(
      h.records.batchCreateRecords(
        { tableId: table.tableId, records: [{ data: {} }, { data: {} }, { data: {} }] },
        call,
      ),
    );
    expect(failure.reason).toBe("record_limit_exceeded");
    expect(await countOf(organizationId)).toEqual({ rows: 18, usage: 18n });
    expect(await outboxRows()).toBe(queued);
    await h.records.batchCreateRecords(
      { tableId: table.tableId, records: [{ data: {} }, { data: {} }] },
      call,
    );
    expect(await countOf(organizationId)).toEqual({ rows: 20, usage: 20n });
  });

  it("follows a plan change at once (its commit writes the shared plan entry)", async () => {
    const call = await as(owner);
    const key = planCacheKey(organizationId);
    // The plan entry is shared with the gateway: the plan's version (one change so far), then
    // every limit, int64s as decimal strings.
    await eventually(async () => {
      expect(
        await failureOf(h.records.createRecord({ tableId: table.tableId, data: {} }, call)),
      ).toMatchObject({ reason: "record_limit_exceeded" });
      const entry = versionedEntryOf(await h.cache.get(key));
      expect(entry?.version).toBe(1n);
      expect(JSON.parse(entry!.value!)).toMatchObject({
        records: "20",
        apiCallsPerMonth: "1000000",
      });
    });
    await h.org.setPlan(
      { organizationId, plan: PlanName.ENTERPRISE, enterpriseLimits: enterprise(21n) },
      await as(OPERATOR),
    );
    // Written at the next version (the change's event may have dropped the value since).
    expect(versionedEntryOf(await h.cache.get(key))?.version).toBe(2n);
    await eventually(async () => {
      await h.records.createRecord({ tableId: table.tableId, data: {} }, call);
    });
    expect(await countOf(organizationId)).toEqual({ rows: 21, usage: 21n });
  });
});

describe("the record limit of several organizations", () => {
  it("counts each organization on its own when creates race in both", async () => {
    const tenants = await Promise.all(
      ["Left", "Right"].map(async (name) => {
        const owner = await h.user(name);
        const organizationId = await organizationOf(owner);
        await h.org.setPlan(
          { organizationId, plan: PlanName.ENTERPRISE, enterpriseLimits: enterprise(5n) },
          await as(OPERATOR),
        );
        const table = await createTable(h, owner, organizationId, [def("Name", FieldType.TEXT)]);
        return { owner, organizationId, table };
      }),
    );
    const results = await Promise.all(
      tenants.flatMap(({ owner, table }) =>
        Array.from({ length: 16 }, async () =>
          h.records.createRecord({ tableId: table.tableId, data: {} }, await as(owner)).then(
            () => "created",
            async (error: unknown) => (await failureOf(Promise.reject(error))).reason,
          ),
        ),
      ),
    );
    for (const [index, { organizationId }] of tenants.entries()) {
      const mine = results.slice(index * 16, index * 16 + 16);
      expect(mine.filter((r) => r === "created")).toHaveLength(5);
      expect(mine.filter((r) => r === "record_limit_exceeded")).toHaveLength(11);
      expect(await countOf(organizationId)).toEqual({ rows: 5, usage: 5n });
    }
  });

  it("keeps the records a lowered plan no longer allows, and creates none until below it", async () => {
    const owner = await h.user("Lowered");
    const organizationId = await organizationOf(owner);
    const setLimit = async (records: bigint) =>
      h.org.setPlan(
        { organizationId, plan: PlanName.ENTERPRISE, enterpriseLimits: enterprise(records) },
        await as(OPERATOR),
      );
    await setLimit(10n);
    const table = await createTable(h, owner, organizationId, [def("Name", FieldType.TEXT)]);
    const call = await as(owner);
    const { records } = await h.records.batchCreateRecords(
      { tableId: table.tableId, records: Array.from({ length: 8 }, () => ({ data: {} })) },
      call,
    );
    await setLimit(5n);
    // Until records takes the change's event (which drops the shared entry's value), it may
    // still hold the old limit in its memory, and a create would pass: wait for the event
    // rather than create until one is refused.
    const key = planCacheKey(organizationId);
    await eventually(async () => {
      expect(versionedEntryOf(await h.cache.get(key))).toEqual({ version: 2n, value: undefined });
    });
    expect(
      await failureOf(h.records.createRecord({ tableId: table.tableId, data: {} }, call)),
    ).toMatchObject({ reason: "record_limit_exceeded" });
    // What is stored stays, and can be changed.
    expect(await countOf(organizationId)).toEqual({ rows: 8, usage: 8n });
    await h.records.updateRecord(
      { tableId: table.tableId, rowId: records[0]!.rowId, data: { Name: "kept" } },
      call,
    );
    // Deleting to the new limit is not room yet; one below it is room for one, however many race.
    await h.records.batchDeleteRecords(
      { tableId: table.tableId, rowIds: records.slice(5).map((r) => r.rowId) },
      call,
    );
    expect(
      await failureOf(h.records.createRecord({ tableId: table.tableId, data: {} }, call)),
    ).toMatchObject({ reason: "record_limit_exceeded" });
    await h.records.deleteRecord({ tableId: table.tableId, rowId: records[4]!.rowId }, call);
    const results = await Promise.allSettled(
      Array.from({ length: 16 }, () =>
        h.records.createRecord({ tableId: table.tableId, data: {} }, call),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(await countOf(organizationId)).toEqual({ rows: 5, usage: 5n });
  });
});

describe("a plan change racing a plan lookup", () => {
  it("never lets a lookup that read the old plan cache it after the change", async () => {
    const owner = await h.user("Racing plans");
    const organizationId = await organizationOf(owner);
    const key = planCacheKey(organizationId);
    // On the free plan (1,000 records), another records replica asks for the plan, and its
    // answer is delayed past a change.
    const slow = holdAnswers(h.org, "getPlan");
    const lookup = new Plans(slow.client, h.cache, SECRET, h.logger).quotaOf(organizationId);
    const { limits, planVersion } = await slow.answered;
    // Meanwhile a third one cached the old plan too; the change must replace it.
    await cachePlan(h.cache, organizationId, planVersion, limits!);
    const old = await h.cache.get(key);
    await h.org.setPlan(
      { organizationId, plan: PlanName.ENTERPRISE, enterpriseLimits: enterprise(1n) },
      await as(OPERATOR),
    );
    await eventually(async () => expect(await h.cache.get(key)).not.toBe(old));
    slow.release();
    expect((await lookup).records).toBe(1000n);
    // Whatever the late answer did, the next lookup anywhere gets the new limit.
    const fresh = new Plans(h.org, h.cache, SECRET, h.logger);
    expect((await fresh.quotaOf(organizationId)).records).toBe(1n);
  });

  it("asks organization once after a plan change, then reads the shared entry", async () => {
    const owner = await h.user("Asked once");
    const organizationId = await organizationOf(owner);
    const key = planCacheKey(organizationId);
    let asked = 0;
    const counting = {
      getPlan: (...args: Parameters<typeof h.org.getPlan>) => {
        asked += 1;
        return h.org.getPlan(...args);
      },
    } as unknown as typeof h.org;
    await h.org.setPlan(
      { organizationId, plan: PlanName.ENTERPRISE, enterpriseLimits: enterprise(9n) },
      await as(OPERATOR),
    );
    // Once records has taken the change's event, which drops the entry's value (keeping its
    // version), the first lookup asks, and the others (replicas, without the limit in their
    // memory) read what it cached.
    await eventually(async () => expect(await h.cache.get(key)).toBe("1"));
    for (let i = 0; i < 3; i++) {
      const replica = new Plans(counting, h.cache, SECRET, h.logger);
      expect((await replica.quotaOf(organizationId)).records).toBe(9n);
    }
    expect(asked).toBe(1);
  });

  it("applies a plan change once it is answered, before its event arrives", async () => {
    const owner = await h.user("Operator's change");
    const organizationId = await organizationOf(owner);
    const plans = new Plans(h.org, h.cache, SECRET, h.logger);
    expect((await plans.quotaOf(organizationId)).records).toBe(1000n);
    await h.org.setPlan(
      { organizationId, plan: PlanName.ENTERPRISE, enterpriseLimits: enterprise(7n) },
      await as(OPERATOR),
    );
    // Another replica, which has not kept the limit in its memory, reads the shared entry.
    const fresh = new Plans(h.org, h.cache, SECRET, h.logger);
    expect((await fresh.quotaOf(organizationId)).records).toBe(7n);
  });
});

describe("the free plan", () => {
  it("holds its 1,000 records under 64 parallel creates", async () => {
    const owner = await h.user("Free owner");
    const organizationId = await organizationOf(owner);
    const table = await createTable(h, owner, organizationId, [def("Name", FieldType.TEXT)]);
    // 999 records straight into storage, counted as the service counts them.
    await h.db.query(
      `insert into ${userTable(organizationId, table.tableId)} (row_id, created_by, updated_by)
       select ${NEXT_ROW_ID}, 'system', 'system' from generate_series(1, 999)`,
    );
    await h.db.query(
      "insert into records.organization_usage (organization_id, records) values ($1, 999)",
      [organizationId.toString()],
    );
    const call = await as(owner);
    const results = await Promise.allSettled(
      Array.from({ length: 64 }, () =>
        h.records.createRecord({ tableId: table.tableId, data: { Name: "late" } }, call),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(await countOf(organizationId)).toEqual({ rows: 1000, usage: 1000n });
    const limits = await h.org.getLimits({ organizationId }, call);
    expect(limits.limits!.records).toBe(1000n);
    expect(limits.usage!.records).toBe(1000n);
  });
});

// The size of a record and of a read (RECORD_MAX_BYTES, PAGE_MAX_BYTES): without these bounds,
// long texts of 100,000 characters in up to 500 fields would let one record grow to tens of
// megabytes, patch by patch, and every read builds its records whole in memory.
describe.each([
  ["one statement", []],
  ["a transaction", [def("Seq", FieldType.AUTONUMBER)]],
])("the size of records and pages, creating in %s", (_, extra) => {
  const RECORD_MESSAGE = "the record's values come to more than 2 MiB";
  /** Texts of 100,000 characters (the most a long text holds) for the fields L0...L(n-1). */
  const texts = (from: number, to: number, letter = "x") =>
    Object.fromEntries(
      Array.from({ length: to - from }, (_, i) => [`L${from + i}`, letter.repeat(100_000)]),
    );
  let owner: TestUser;
  let organizationId: bigint;
  let table: TestTable;

  beforeAll(async () => {
    owner = await h.user("Large owner");
    organizationId = await organizationOf(owner);
    const longs = Array.from({ length: 24 }, (_, i) => def(`L${i}`, FieldType.LONG_TEXT));
    table = await createTable(h, owner, organizationId, [...longs, ...extra]);
  });

  const stored = () => storedRows(h, table.tableId);

  it("refuses a create whose record would pass 2 MiB, writing nothing", async () => {
    const call = await as(owner);
    const before = await stored();
    const queued = await outboxRows();
    // 22 texts of 100,000 characters: 2.2 MB, though every value is within its own bound.
    expect(
      await validationOf(
        h.records.createRecord({ tableId: table.tableId, data: texts(0, 22) }, call),
      ),
    ).toEqual([{ key: "data", message: RECORD_MESSAGE, source: "body", code: "too_long" }]);
    expect(
      await validationOf(
        h.records.batchCreateRecords(
          {
            tableId: table.tableId,
            records: [{ data: texts(0, 2) }, { data: texts(0, 22) }, { data: texts(0, 24) }],
          },
          call,
        ),
      ),
    ).toEqual([
      { key: "records.1.data", message: RECORD_MESSAGE, source: "body", code: "too_long" },
      { key: "records.2.data", message: RECORD_MESSAGE, source: "body", code: "too_long" },
    ]);
    expect(await stored()).toEqual(before);
    expect(await outboxRows()).toBe(queued);
    // Two-byte characters count twice: 11 texts of "é" are 2.2 MB too.
    expect(
      await validationOf(
        h.records.createRecord({ tableId: table.tableId, data: texts(0, 11, "é") }, call),
      ),
    ).toEqual([{ key: "data", message: RECORD_MESSAGE, source: "body", code: "too_long" }]);
    await h.records.createRecord({ tableId: table.tableId, data: texts(0, 20) }, call);
    expect(await stored()).toHaveLength(before.length + 1);
  });

  it("refuses a patch that would grow a record past 2 MiB, leaving it unchanged", async () => {
    const call = await as(owner);
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: texts(0, 10) },
      call,
    );
    const rowId = record!.rowId;
    await h.records.updateRecord({ tableId: table.tableId, rowId, data: texts(10, 20) }, call);
    const before = await stored();
    const queued = await outboxRows();
    expect(
      await validationOf(
        h.records.updateRecord({ tableId: table.tableId, rowId, data: texts(20, 22) }, call),
      ),
    ).toEqual([{ key: "data", message: RECORD_MESSAGE, source: "body", code: "too_long" }]);
    const { record: small } = await h.records.createRecord(
      { tableId: table.tableId, data: {} },
      call,
    );
    const afterSmall = await stored();
    const queuedAfterSmall = await outboxRows();
    expect(
      await validationOf(
        h.records.batchUpdateRecords(
          {
            tableId: table.tableId,
            records: [
              { rowId: small!.rowId, data: texts(0, 1) },
              { rowId, data: texts(20, 22) },
            ],
          },
          call,
        ),
      ),
    ).toEqual([
      { key: "records.1.data", message: RECORD_MESSAGE, source: "body", code: "too_long" },
    ]);
    expect(await stored()).toEqual(afterSmall);
    expect(await outboxRows()).toBe(queuedAfterSmall);
    expect(afterSmall.filter((row) => row.row_id !== small!.rowId.toString())).toEqual(before);
    expect(queuedAfterSmall).toBeGreaterThan(queued);
    // Replacing a text by one as long keeps the record within the bound.
    await h.records.updateRecord({ tableId: table.tableId, rowId, data: texts(0, 1, "y") }, call);
  });
});

describe("the size of a read", () => {
  it("refuses a read that would send more than 16 MiB of values, a smaller page answers", async () => {
    const owner = await h.user("Large reader");
    const organizationId = await organizationOf(owner);
    const call = await as(owner);
    const own = await createTable(h, owner, organizationId, [def("L0", FieldType.LONG_TEXT)]);
    // Straight into storage (no write stores a record past 2 MiB): 1.9 MB each, so eight come
    // to 15.2 MB and nine to 17.1 MB; and one of 17 MB, which no page can hold.
    const L0 = fieldColumn(BigInt(own.id.L0!));
    const inserted = await h.db.query(
      `insert into ${userTable(organizationId, own.tableId)}
         (row_id, ${L0}, created_by, updated_by)
       select ${NEXT_ROW_ID}, repeat('z', n), 'system', 'system'
       from (select n from unnest(array[1900000, 1900000, 1900000, 1900000, 1900000, 1900000,
         1900000, 1900000, 1900000, 17000000]) with ordinality as sizes(n, i) order by i) sizes
       returning row_id`,
    );
    const rowIds = inserted.rows.map((row) => BigInt(row.row_id));
    const page = await h.records.listRecords({ tableId: own.tableId, limit: 8 }, call);
    expect(page.records.map((r) => r.rowId)).toEqual(rowIds.slice(0, 8));
    expect(page.total).toBe(10n);
    const limitMessage =
      "the page's records hold more than 16 MiB of values; ask for fewer records";
    expect(
      await validationOf(h.records.listRecords({ tableId: own.tableId, limit: 9 }, call)),
    ).toEqual([{ key: "limit", message: limitMessage, source: "query", code: "too_long" }]);
    expect(
      await validationOf(
        h.records.listRecords({ tableId: own.tableId, limit: 1, offset: 9 }, call),
      ),
    ).toEqual([{ key: "limit", message: limitMessage, source: "query", code: "too_long" }]);
    // The same in another order than row_id's (read by the statement that sorts the matches
    // apart from their values): one insert gave them one created_at, so row ids break the tie.
    const byCreation = { tableId: own.tableId, sortList: "created_at" };
    const sorted = await h.records.listRecords({ ...byCreation, limit: 8 }, call);
    expect(sorted.records.map((r) => r.rowId)).toEqual(rowIds.slice(0, 8));
    expect(sorted.total).toBe(10n);
    expect(await validationOf(h.records.listRecords({ ...byCreation, limit: 9 }, call))).toEqual([
      { key: "limit", message: limitMessage, source: "query", code: "too_long" },
    ]);
    // Past the end the count still comes.
    const past = await h.records.listRecords({ tableId: own.tableId, limit: 1, offset: 10 }, call);
    expect({ records: past.records, total: past.total }).toEqual({ records: [], total: 10n });

    // A batch update or delete reads its records whole (an update answers them too): nine of
    // them are refused, and nothing changes; eight go through.
    const nine = rowIds.slice(0, 9);
    const stored = async () =>
      (
        await h.db.query(
          `select row_id, version, updated_by, md5(${L0}) as sum
           from ${userTable(organizationId, own.tableId)} order by row_id`,
        )
      ).rows;
    const before = await stored();
    expect(
      await validationOf(
        h.records.batchUpdateRecords(
          { tableId: own.tableId, records: nine.map((rowId) => ({ rowId, data: { L0: "x" } })) },
          call,
        ),
      ),
    ).toEqual([
      {
        key: "records",
        message: "the records hold more than 16 MiB of values; update fewer at once",
        source: "body",
        code: "too_long",
      },
    ]);
    expect(
      await validationOf(
        h.records.batchDeleteRecords({ tableId: own.tableId, rowIds: nine }, call),
      ),
    ).toEqual([
      {
        key: "row_ids",
        message: "the records hold more than 16 MiB of values; delete fewer at once",
        source: "body",
        code: "too_long",
      },
    ]);
    expect(await stored()).toEqual(before);
    const { records: updated } = await h.records.batchUpdateRecords(
      {
        tableId: own.tableId,
        records: nine.slice(0, 8).map((rowId) => ({ rowId, data: { L0: "x" } })),
      },
      call,
    );
    expect(updated.map((r) => r.rowId)).toEqual(nine.slice(0, 8));
    await h.records.batchDeleteRecords({ tableId: own.tableId, rowIds: nine.slice(1) }, call);
    expect((await stored()).map((row) => BigInt(row.row_id))).toEqual([rowIds[0], rowIds[9]]);
  });
});

describe("the size of a record of large numbers", () => {
  it("counts its numbers as PostgreSQL sends them back, written out in full", async () => {
    const owner = await h.user("Large numbers");
    const organizationId = await organizationOf(owner);
    const call = await as(owner);
    const fields = Array.from({ length: 4 }, (_, i) => def(`J${i}`, FieldType.JSON));
    const table = await createTable(h, owner, organizationId, fields);
    // 14,000 numbers of 1e308 are 98 KB as JSON.stringify writes them ("1e+308"), within a
    // JSON value's 100 KiB; PostgreSQL sends each back as 309 digits, 4.3 MB a value.
    const big = Array.from({ length: 14_000 }, () => 1e308);
    const data = Object.fromEntries(fields.map((field) => [field.name, big]));
    const stored = async () => (await storedRows(h, table.tableId)).length;
    expect(
      await validationOf(h.records.createRecord({ tableId: table.tableId, data }, call)),
    ).toEqual([
      {
        key: "data",
        message: "the record's values come to more than 2 MiB",
        source: "body",
        code: "too_long",
      },
    ]);
    expect(await stored()).toBe(0);
    // Numbers that come back as they were sent, and a few large ones, are stored and read.
    const { record } = await h.records.createRecord(
      {
        tableId: table.tableId,
        data: { J0: Array.from({ length: 14_000 }, () => 1.5), J1: [1e308, -5e-324, 1.5e-7] },
      },
      call,
    );
    const page = await h.records.listRecords({ tableId: table.tableId, limit: 1 }, call);
    expect(page.records.map((r) => r.rowId)).toEqual([record!.rowId]);
    expect(await stored()).toBe(1);
  });
});

describe("the organization's usage lock", () => {
  // A create of one statement writes its records first and takes the usage lock (the quota)
  // last: near the limit, the organization's other creates wait for its commit, not for its
  // insert.
  it("is taken after the records are written", async () => {
    const owner = await h.user("Quota last");
    const organizationId = await organizationOf(owner);
    const table = await createTable(h, owner, organizationId, [def("Name", FieldType.TEXT)]);
    const call = await as(owner);
    await h.records.createRecord({ tableId: table.tableId, data: { Name: "first" } }, call);
    const holder = await h.db.connect();
    try {
      await holder.query("begin");
      await holder.query("select pg_advisory_xact_lock($1)", [await usageLock(organizationId)]);
      const creating = h.records.batchCreateRecords(
        {
          tableId: table.tableId,
          records: Array.from({ length: 50 }, (_, i) => ({ data: { Name: `r${i}` } })),
        },
        call,
      );
      // The create waits for the row. A transaction id is assigned at its first write: it has
      // one when it inserted its records before asking for the row.
      const waiting = await eventually(async () => {
        const { rows } = await h.db.query(
          `select backend_xid::text as xid from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock'
             and query like '%create_checks%'`,
        );
        expect(rows).toHaveLength(1);
        return rows[0] as { xid: string | null };
      });
      expect(waiting.xid).not.toBeNull();
      expect(await countOf(organizationId)).toEqual({ rows: 1, usage: 1n });
      await holder.query("commit");
      expect((await creating).records).toHaveLength(50);
      expect(await countOf(organizationId)).toEqual({ rows: 51, usage: 51n });
    } finally {
      await holder.query("rollback").catch(() => undefined);
      holder.release();
    }
  });
});

/** The advisory lock of an organization's record count (sql/take_records.sql). */
async function usageLock(organizationId: bigint): Promise<string> {
  const { rows } = await h.db.query(
    "select hashtextextended('records.usage:' || $1, 0)::text as key",
    [organizationId.toString()],
  );
  return rows[0].key;
}

describe("take_records, the record quota", () => {
  // How many records may be counted and not yet committed at once: far from the limit by more
  // than this, creates count without waiting for each other.
  let open: bigint;
  let nextOrganization = 9_000_000_000n;
  const organization = () => nextOrganization++;
  const take = (client: { query: PoolClient["query"] }, id: bigint, count: number, limit: bigint) =>
    client
      .query("select records.take_records($1, $2, $3) as ok", [
        id.toString(),
        count,
        limit.toString(),
      ])
      .then((result) => result.rows[0].ok as boolean);
  const counted = async (id: bigint) => {
    const { rows } = await h.db.query("select records.record_usage($1)::text as n", [
      id.toString(),
    ]);
    return BigInt(rows[0].n);
  };
  /** Counts `records` in a share of the organization's, or in its row (counted before shares). */
  const share = (id: bigint, records: bigint, table = "organization_usage_share") =>
    h.db.query(`insert into records.${table} (organization_id, records) values ($1, $2)`, [
      id.toString(),
      records.toString(),
    ]);
  /** Runs `work` in a transaction of its own, left open until `end` is called. */
  async function holding<T>(work: (client: PoolClient) => Promise<T>) {
    const client = await h.db.connect();
    await client.query("begin");
    const result = await work(client);
    return {
      result,
      async end(how: "commit" | "rollback") {
        try {
          await client.query(how);
        } finally {
          client.release();
        }
      },
    };
  }

  beforeAll(async () => {
    const { rows } = await h.db.query(
      `select 1000 * (current_setting('max_connections')::bigint
         + current_setting('max_prepared_transactions')::bigint) as open`,
    );
    open = BigInt(rows[0].open);
  });

  it("lets parallel creates far from the limit count without waiting for each other", async () => {
    const id = organization();
    const limit = 10n * open;
    const first = await holding((client) => take(client, id, 1000, limit));
    try {
      expect(first.result).toBe(true);
      // Another transaction counts while the first is open (a wait would time out).
      const second = await holding(async (client) => {
        await client.query("set local lock_timeout = '1s'");
        return take(client, id, 1, limit);
      });
      expect(second.result).toBe(true);
      await second.end("commit");
    } finally {
      await first.end("commit");
    }
    expect(await counted(id)).toBe(1001n);
    // Two transactions at once took two shares.
    const { rows } = await h.db.query(
      "select count(*)::int as n from records.organization_usage_share where organization_id = $1",
      [id.toString()],
    );
    expect(rows[0].n).toBe(2);
  });

  it("counts exactly near the limit: a create waits for the one before it to commit", async () => {
    const id = organization();
    const limit = 2n * open;
    const first = await holding((client) => take(client, id, 1, limit));
    expect(first.result).toBe(true);
    const second = await holding(async (client) => {
      await client.query("set local lock_timeout = '200ms'");
      return take(client, id, 1, limit).catch((error: { code?: string }) => error.code);
    });
    await second.end("rollback");
    await first.end("commit");
    // lock_not_available: it waited for the first create's lock.
    expect(second.result).toBe("55P03");
    expect(await counted(id)).toBe(1n);
  });

  it("never passes the limit, whichever way each of many parallel creates counts", async () => {
    // Counted so far: near enough to the limit that the first creates count shared and the
    // later ones, which find the others' records committed, exactly; 20 more than fit.
    const id = organization();
    const limit = 4n * open;
    await share(id, limit - 2n * open - 3000n, "organization_usage");
    const fits = Number((2n * open + 3000n) / 1000n);
    const results = await Promise.all(
      Array.from({ length: fits + 20 }, async () => {
        const { result, end } = await holding((client) => take(client, id, 1000, limit));
        await end("commit");
        return result;
      }),
    );
    expect(results.filter(Boolean)).toHaveLength(fits);
    expect(await counted(id)).toBe(limit - 2n * open - 3000n + BigInt(fits) * 1000n);
    expect(await counted(id)).toBeLessThanOrEqual(limit);
  });

  it("counts exactly when the records committed while it waited bring the limit near", async () => {
    const id = organization();
    const limit = 3n * open;
    // An exact create holds the lock and counts records the second create cannot see yet.
    const holder = await holding(async (client) => {
      await client.query("select pg_advisory_xact_lock($1)", [await usageLock(id)]);
      await client.query("select records.record_usage_add($1, $2)", [
        id.toString(),
        (limit - 5n).toString(),
      ]);
    });
    const client = await h.db.connect();
    try {
      // The sum it reads first (0) lets it ask for the lock shared; under the lock it finds
      // limit - 5 counted and counts exactly: 5 fit, 6 do not.
      const six = take(client, id, 6, limit);
      await eventually(async () => {
        const { rows } = await h.db.query(
          `select count(*)::int as n from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock'
             and query like '%take_records%'`,
        );
        expect(rows[0].n).toBe(1);
      });
      await holder.end("commit");
      expect(await six).toBe(false);
      expect(await take(client, id, 5, limit)).toBe(true);
    } finally {
      client.release();
    }
    expect(await counted(id)).toBe(limit);
  });

  it("adds a delete to a share no one holds, and the sum is the count", async () => {
    const id = organization();
    await share(id, 3n);
    const holder = await holding((client) =>
      client.query("select records.record_usage_add($1, 4)", [id.toString()]),
    );
    try {
      // The first share is held: the delete goes to a new one, negative, and does not wait.
      await h.db.query("select records.record_usage_add($1, -2)", [id.toString()]);
    } finally {
      await holder.end("commit");
    }
    const { rows } = await h.db.query(
      "select records::int from records.organization_usage_share where organization_id = $1 order by id",
      [id.toString()],
    );
    expect(rows.map((row) => row.records)).toEqual([7, -2]);
    expect(await counted(id)).toBe(5n);
  });
});
