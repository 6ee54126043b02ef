import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "../e2e/support/http.js";
import { q } from "../e2e/support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "../e2e/support/records.js";

// Random link writes and record deletions across two linked tables, through the gateway, held
// against a model of the linked pairs: after every step both sides show exactly the model's
// pairs, and no link names a deleted record. A refused write (an id of a deleted record) must
// change nothing.
//
// Reproduce a failure with the seed it prints: FUZZ_SEED=<seed> npx vitest run test/fuzz/links.

const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const RUNS = 15 * Number(process.env.FUZZ_SCALE ?? 1);

type Api = ReturnType<typeof client>;
type Side = "a" | "b";

type Step =
  | { kind: "create"; side: Side; links: number[] }
  | { kind: "set"; side: Side; row: number; links: number[] }
  | { kind: "delete"; side: Side; row: number };

let sys: TestSystem;
let api: Api;
let tenant: Tenant;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api, { plan: "business" });
});

afterAll(async () => {
  await sys?.stop();
});

/** Row picks are indexes into the side's rows so far (live or deleted), taken modulo. */
const pick = fc.nat({ max: 50 });
const side = fc.constantFrom<Side>("a", "b");
const links = fc.array(pick, { maxLength: 4 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant("create" as const), side, links }), weight: 4 },
  {
    arbitrary: fc.record({ kind: fc.constant("set" as const), side, row: pick, links }),
    weight: 4,
  },
  { arbitrary: fc.record({ kind: fc.constant("delete" as const), side, row: pick }), weight: 2 },
);

interface World {
  tables: Record<Side, TestTable>;
  /** The link field's name on each side. */
  field: Record<Side, string>;
  /** Every row created on each side, in order; deleted ones stay listed. */
  rows: Record<Side, number[]>;
  deleted: Set<number>;
  /** Linked pairs as `${a} ${b}`. */
  pairs: Set<string>;
}

const other = (s: Side): Side => (s === "a" ? "b" : "a");
const pairKey = (s: Side, own: number, linked: number) =>
  s === "a" ? `${own} ${linked}` : `${linked} ${own}`;

async function world(): Promise<World> {
  const a = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
  const b = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
  const created = await api("POST", "/field/create", {
    token: tenant.owner.token,
    query: q({ table_id: a.tableId }),
    body: { name: "Link", type: "link", options: { table_id: b.tableId } },
  });
  expect(created.status, created.text).toBe(200);
  const fields = await api("GET", "/field/list", {
    token: tenant.owner.token,
    query: q({ table_id: b.tableId }),
  });
  const inverse = (fields.body.data.fields as { name: string; type: string }[]).find(
    (f) => f.type === "link",
  )!;
  return {
    tables: { a, b },
    field: { a: "Link", b: inverse.name },
    rows: { a: [], b: [] },
    deleted: new Set(),
    pairs: new Set(),
  };
}

/** The ids a step's picks name on `s`'s other side (deleted rows included), repeats once. */
function targets(w: World, s: Side, picks: number[]): number[] {
  const rows = w.rows[other(s)];
  if (rows.length === 0) return [];
  return [...new Set(picks.map((p) => rows[p % rows.length]!))];
}

async function apply(w: World, s: Step): Promise<void> {
  const table = w.tables[s.side];
  const paths = v1(table.databaseId, table.tableId);
  if (s.kind === "delete") {
    const rows = w.rows[s.side];
    if (rows.length === 0) return;
    const row = rows[s.row % rows.length]!;
    const response = await api("DELETE", paths.record(row), { token: tenant.writeToken });
    expect(response.status, response.text).toBe(w.deleted.has(row) ? 404 : 200);
    w.deleted.add(row);
    for (const pair of [...w.pairs]) {
      if (pair.split(" ").map(Number).includes(row)) w.pairs.delete(pair);
    }
    return;
  }
  const linked = targets(w, s.side, s.links);
  const refused = linked.some((id) => w.deleted.has(id));
  if (s.kind === "create") {
    const response = await api("POST", paths.records, {
      token: tenant.writeToken,
      body: { data: { Name: "x", [w.field[s.side]]: linked } },
    });
    if (refused) {
      expect(response.status, response.text).toBe(400);
      return;
    }
    expect(response.status, response.text).toBe(200);
    const row = response.body.data.record.row_id as number;
    w.rows[s.side].push(row);
    for (const id of linked) w.pairs.add(pairKey(s.side, row, id));
    return;
  }
  const rows = w.rows[s.side];
  if (rows.length === 0) return;
  const row = rows[s.row % rows.length]!;
  const response = await api("PATCH", paths.record(row), {
    token: tenant.writeToken,
    body: { data: { [w.field[s.side]]: linked } },
  });
  if (w.deleted.has(row)) {
    expect(response.status, response.text).toBe(404);
    return;
  }
  if (refused) {
    expect(response.status, response.text).toBe(400);
    return;
  }
  expect(response.status, response.text).toBe(200);
  for (const pair of [...w.pairs]) {
    const [a, b] = pair.split(" ").map(Number) as [number, number];
    if ((s.side === "a" ? a : b) === row) w.pairs.delete(pair);
  }
  for (const id of linked) w.pairs.add(pairKey(s.side, row, id));
}

/** Both sides as the API lists them, held against the model. */
async function check(w: World): Promise<void> {
  for (const s of ["a", "b"] as const) {
    const table = w.tables[s];
    const response = await api("GET", v1(table.databaseId, table.tableId).records, {
      token: tenant.readToken,
      query: q({ limit: 1000, response_format: "names" }),
    });
    expect(response.status, response.text).toBe(200);
    const records = response.body.data.records as {
      row_id: number;
      data: Record<string, { row_id: number }[]>;
    }[];
    const live = w.rows[s].filter((row) => !w.deleted.has(row));
    expect(records.map((r) => r.row_id)).toEqual(live);
    for (const record of records) {
      const shown = record.data[w.field[s]]!.map((link) => link.row_id);
      const expected = [...w.pairs]
        .map((pair) => pair.split(" ").map(Number) as [number, number])
        .filter(([a, b]) => (s === "a" ? a : b) === record.row_id)
        .map(([a, b]) => (s === "a" ? b : a))
        .sort((x, y) => x - y);
      expect(shown, `${s} ${record.row_id}`).toEqual(expected);
      for (const id of shown) expect(w.deleted.has(id)).toBe(false);
    }
  }
}

describe("links under random writes and deletes", () => {
  it("keep both sides in agreement and never name a deleted record", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), async (steps) => {
        const w = await world();
        for (const s of steps) {
          await apply(w, s);
          await check(w);
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
  }, 300_000);
});
