import type { Orm } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { ChangeType, ResponseFormat } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChangeRetention, parseCursor } from "../src/change-log.js";
import { createRecordsOrm } from "../src/service.js";
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
// commits late comes after what a reader already read, never behind its cursor. A write's
// changes are one row of record_change_write, positioned as one block: a reader still reads
// them one by one, with a cursor anywhere inside the block.

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
    // Sequenced soon after the write answered (at once only for `now`).
    await eventually(async () => {
      const page = await h.records.listChanges({ tableId: table.tableId }, service);
      expect(page.changes.map((c) => c.rowId)).toEqual([made.record!.rowId]);
    });
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

/** The rows the log stores for a table: one per write, with its block's last position. */
async function writesOf(tableId: bigint): Promise<{ last: bigint; size: number }[]> {
  const { rows } = await h.db.query(
    `select last_position::text as last, size from records.record_change_write
     where table_id = $1 order by id`,
    [tableId.toString()],
  );
  return rows.map((row: { last: string; size: number }) => ({
    last: BigInt(row.last),
    size: row.size,
  }));
}

describe("a write's block of changes", () => {
  it("is one row, read back page by page with a cursor inside it, filtered and shown as asked", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("Rank", FieldType.NUMBER),
    ]);
    const call = await as(t.owner);
    const made = await h.records.batchCreateRecords(
      {
        tableId: table.tableId,
        records: Array.from({ length: 1000 }, (_, i) => ({
          data: { [table.id.Name!]: `n${i}`, [table.id.Rank!]: i },
        })),
      },
      call,
    );
    const rowIds = made.records.map((r) => r.rowId);
    const read = (after: string, more: object = {}) =>
      h.records.listChanges({ tableId: table.tableId, after, ...more }, call);
    await read("now"); // the write answered, so it is sequenced after this
    const [write] = await writesOf(table.tableId);
    expect(await writesOf(table.tableId)).toEqual([{ last: expect.any(BigInt), size: 1000 }]);
    // Kept as the json text the write handed over (changes_json), not as jsonb (changes).
    const { rows: forms } = await h.db.query(
      `select changes is null as no_jsonb, json_array_length(changes_json) as n
       from records.record_change_write where table_id = $1`,
      [table.tableId.toString()],
    );
    expect(forms).toEqual([{ no_jsonb: true, n: 1000 }]);

    // Pages of 300 from the start: 300, 300, 300, 100, each change once, in the batch's order,
    // at consecutive positions ending at the block's last.
    const seen: bigint[] = [];
    const positions: bigint[] = [];
    let after = "";
    for (const size of [300, 300, 300, 100]) {
      const page = await read(after, { limit: 300 });
      expect(page.changes).toHaveLength(size);
      seen.push(...page.changes.map((c) => c.rowId));
      positions.push(...page.changes.map((c) => parseCursor(c.changeId)!.position));
      after = page.next;
      expect(page.hasMore).toBe(size === 300);
    }
    expect(seen).toEqual(rowIds);
    expect(positions).toEqual(
      Array.from({ length: 1000 }, (_, i) => write!.last - 999n + BigInt(i)),
    );
    expect((await read(after)).changes).toEqual([]);

    // A change's id is a cursor inside the block: the page after it starts at the next change.
    const middle = (await read("", { limit: 500 })).changes[499]!;
    const rest = await read(middle.changeId, { limit: 1000 });
    expect(rest.changes.map((c) => c.rowId)).toEqual(rowIds.slice(500));
    expect(rest.hasMore).toBe(false);

    // `where`, `types` and `fields` apply to each change of the block; a filtered page moves
    // `next` past everything it looked at.
    const filtered = await read(middle.changeId, {
      where: "(Rank,gte,990)",
      types: [ChangeType.CREATED],
      fieldList: "Name",
      responseFormat: ResponseFormat.NAMES,
    });
    expect(filtered.changes.map((c) => c.rowId)).toEqual(rowIds.slice(990));
    expect(JSON.parse(filtered.changes[0]!.record!.dataJson)).toEqual({ Name: "n990" });
    const none = await read(middle.changeId, { types: [ChangeType.DELETED] });
    expect(none.changes).toEqual([]);
    expect(parseCursor(none.next)!.position).toBeGreaterThanOrEqual(write!.last);
  });

  it("never interleaves with other writes: concurrent writers each keep their changes together, read once", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const call = await as(t.owner);
    const start = await h.records.listChanges({ tableId: table.tableId, after: "now" }, call);
    // A follower reads small pages while 6 writers each make 4 batches of 25 and an update.
    const followed: { rowId: bigint; type: ChangeType; position: bigint }[] = [];
    let cursor = start.next;
    let writing = true;
    const follow = async () => {
      for (;;) {
        const done = !writing;
        const page = await h.records.listChanges(
          { tableId: table.tableId, after: cursor, limit: 7 },
          call,
        );
        followed.push(
          ...page.changes.map((c) => ({
            rowId: c.rowId,
            type: c.type,
            position: parseCursor(c.changeId)!.position,
          })),
        );
        cursor = page.next;
        if (done && !page.hasMore) {
          // One more read after the writers answered and the end is known.
          const end = await h.records.listChanges({ tableId: table.tableId, after: "now" }, call);
          if (parseCursor(end.next)!.position <= parseCursor(cursor)!.position) return;
        }
      }
    };
    const writes: bigint[][] = [];
    const writer = async (w: number) => {
      for (let b = 0; b < 4; b += 1) {
        const made = await h.records.batchCreateRecords(
          {
            tableId: table.tableId,
            records: Array.from({ length: 25 }, (_, i) => ({
              data: { [table.id.Name!]: `w${w}b${b}r${i}` },
            })),
          },
          call,
        );
        writes.push(made.records.map((r) => r.rowId));
      }
      const first = writes.find((ids) => ids.length === 25)!;
      await h.records.updateRecord(
        { tableId: table.tableId, rowId: first[0]!, data: { [table.id.Name!]: `updated by ${w}` } },
        call,
      );
    };
    const following = follow();
    await Promise.all(Array.from({ length: 6 }, (_, w) => writer(w)));
    writing = false;
    await following;

    const created = followed.filter((c) => c.type === ChangeType.CREATED);
    expect(created).toHaveLength(600);
    expect(followed.filter((c) => c.type === ChangeType.UPDATED)).toHaveLength(6);
    // Once each, in increasing positions, each write's 25 changes together in its order.
    const positions = followed.map((c) => c.position);
    expect(new Set(positions).size).toBe(positions.length);
    expect([...positions].sort((a, b) => (a < b ? -1 : 1))).toEqual(positions);
    const rowIds = created.map((c) => c.rowId);
    for (const ids of writes) {
      const at = rowIds.indexOf(ids[0]!);
      expect(rowIds.slice(at, at + 25)).toEqual(ids);
    }
    // A reader from the start sees the same log.
    const all: bigint[] = [];
    let after = start.next;
    for (;;) {
      const page = await h.records.listChanges(
        { tableId: table.tableId, after, limit: 1000 },
        call,
      );
      all.push(...page.changes.map((c) => parseCursor(c.changeId)!.position));
      after = page.next;
      if (!page.hasMore) break;
    }
    expect(all).toEqual(positions);
    expect(await writesOf(table.tableId)).toHaveLength(24 + 6);
  });

  it("goes whole past the retention: a cursor inside a removed block has expired, one at its end has not", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const call = await as(t.owner);
    const batch = (n: number) =>
      h.records.batchCreateRecords(
        { tableId: table.tableId, records: Array.from({ length: n }, () => ({ data: {} })) },
        call,
      );
    await batch(5);
    await h.records.listChanges({ tableId: table.tableId, after: "now" }, call);
    const second = await batch(3);
    const read = (after: string) => h.records.listChanges({ tableId: table.tableId, after }, call);
    const before = (await read("")).changes;
    expect(before).toHaveLength(8);
    const [old] = await writesOf(table.tableId);

    // The first write was sequenced long ago; retention removes it, and only it.
    await h.db.query(
      `update records.record_change_write set sequenced_at = now() - interval '1 hour'
       where table_id = $1 and last_position = $2`,
      [table.tableId.toString(), old!.last.toString()],
    );
    const orm: Orm = await createRecordsOrm(h.databaseUrl);
    try {
      const removed = await new ChangeRetention(orm, h.logger, 60, 60_000).purge();
      expect(removed).toBeGreaterThanOrEqual(5);
    } finally {
      await orm.close();
    }
    expect(await writesOf(table.tableId)).toHaveLength(1);

    // Inside the removed block (its first change, its fourth): the changes after it are gone.
    for (const inside of [before[0]!, before[3]!]) {
      expect(await reasonOf(read(inside.changeId))).toBe("cursor_expired");
    }
    // At its last change nothing was lost: the next write follows. From the start: what is kept.
    const next = await read(before[4]!.changeId);
    expect(next.changes.map((c) => c.rowId)).toEqual(second.records.map((r) => r.rowId));
    expect((await read("")).changes.map((c) => c.changeId)).toEqual(
      before.slice(5).map((c) => c.changeId),
    );
  });
});
