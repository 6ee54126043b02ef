import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { ChangeType } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseCursor } from "../src/change-log.js";
import {
  as,
  createTable,
  def,
  eventually,
  type Harness,
  reasonOf,
  startHarness,
  type Team,
  team,
} from "./harness.js";

// The change log's order: positions are given after commit, so a change whose transaction
// commits late comes after what a reader already read, never behind its cursor.

let h: Harness;
let t: Team;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

describe("the change log", () => {
  it("places a change whose write commits late after the changes already read", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const call = await as(t.owner);
    const read = (after: string) => h.records.listChanges({ tableId: table.tableId, after }, call);
    const first = await h.records.createRecord(
      { tableId: table.tableId, data: { [table.id.Name!]: "first" } },
      call,
    );
    const start = await read("");
    expect(start.changes.map((c) => c.rowId)).toEqual([first.record!.rowId]);

    // A write that has written its change (its id comes before the next write's) but not yet
    // committed, as a slow transaction would.
    const slow = await h.db.connect();
    try {
      await slow.query("begin");
      await slow.query(
        `insert into records.outbox (event_id, subject, payload)
         values (gen_random_uuid(), 'records.changes', convert_to($1, 'UTF8'))`,
        [
          JSON.stringify({
            table_id: table.tableId.toString(),
            organization_id: t.organizationId.toString(),
            database_id: table.databaseId.toString(),
            actor: { type: "system", id: "0" },
            changes: [{ type: "created", row_id: "987654321", data: {} }],
          }),
        ],
      );
      const second = await h.records.createRecord(
        { tableId: table.tableId, data: { [table.id.Name!]: "second" } },
        call,
      );
      // The reader moves past the second write while the slow one is still open.
      const past = await eventually(async () => {
        const page = await read(start.next);
        expect(page.changes.map((c) => c.rowId)).toEqual([second.record!.rowId]);
        return page;
      });
      await slow.query("commit");
      // The slow change comes after the cursor the reader holds, not before it.
      await eventually(async () => {
        const page = await read(past.next);
        expect(page.changes.map((c) => c.rowId)).toEqual([987654321n]);
        expect(page.changes[0]!.type).toBe(ChangeType.CREATED);
      });
    } finally {
      slow.release();
    }
    const all = await read("");
    expect(all.changes.map((c) => c.rowId)).toEqual([
      first.record!.rowId,
      expect.any(BigInt),
      987654321n,
    ]);
    // Positions increase in the log's order.
    const positions = all.changes.map((c) => parseCursor(c.changeId)!.position);
    expect([...positions].sort((a, b) => (a < b ? -1 : 1))).toEqual(positions);
    // Nothing of the change log reaches the bus.
    const { rows } = await h.db.query(
      "select count(*)::int as n from records.outbox where subject = 'records.changes'",
    );
    expect(rows[0].n).toBe(0);
  });

  it("answers now with a cursor behind every change whose write answered", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const call = await as(t.owner);
    const made = await h.records.batchCreateRecords(
      { tableId: table.tableId, records: [{ data: {} }, { data: {} }] },
      call,
    );
    const now = await h.records.listChanges({ tableId: table.tableId, after: "now" }, call);
    expect(now.changes).toEqual([]);
    const after = await h.records.listChanges({ tableId: table.tableId, after: now.next }, call);
    expect(after.changes).toEqual([]);
    const before = await h.records.listChanges({ tableId: table.tableId }, call);
    expect(before.changes.map((c) => c.rowId)).toEqual(made.records.map((r) => r.rowId));
  });

  it("lets another service read any table's changes, and no one outside the organization", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const made = await h.records.createRecord(
      { tableId: table.tableId, data: { [table.id.Name!]: "x" } },
      await as(t.owner),
    );
    const service = await as({ kind: "service", service: "webhooks" });
    const page = await h.records.listChanges({ tableId: table.tableId }, service);
    expect(page.changes.map((c) => c.rowId)).toEqual([made.record!.rowId]);
    expect(
      await reasonOf(
        h.records.listChanges({ tableId: table.tableId, databaseId: 999_999_999n }, service),
      ),
    ).toBe("table_not_found");
    expect(
      await reasonOf(h.records.listChanges({ tableId: table.tableId }, await as({ id: 424242n }))),
    ).toBe("table_not_found");
  });
});
