import { query } from "@rowbase/kit";
import { createTestDatabase, migrateBefore, sessionIn, testInfra } from "@rowbase/kit/testing";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrations } from "../src/migrations/initial-schema.js";
import { migrateRecords, SCHEMA } from "../src/service.js";
import { appliedFrom } from "./sql-files.js";

// Migration RecordChangeWrites: the changes logged one row each before it move to
// record_change_write as blocks of one, their positions kept (so cursors handed out read on
// where they were), those not sequenced yet in their order for the sequencer; the view
// record_change then shows them as the table did.

const COLUMNS = `position::text, table_id::text, organization_id::text, database_id::text,
  row_id::text, type, actor_type, actor_id::text, data, previous, changed_fields,
  created_at::text, updated_at::text, at::text, sequenced_at::text`;

let session: pg.Client;
let drop: () => Promise<void>;
let before: Record<string, unknown>[];

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  drop = db.drop;
  await migrateBefore(
    { url: db.url, schema: SCHEMA, entities: [], migrations },
    "RecordChangeWrites",
    async (old) => {
      const em = old.em.fork();
      await query(
        em,
        `insert into record_change (position, table_id, organization_id, database_id, row_id, type,
           actor_type, actor_id, data, previous, changed_fields, created_at, updated_at, at,
           sequenced_at)
         values
           (1, 7, 1, 2, 10, 'created', 'api_token', 3, '{"40": "a", "41": null}', null, null,
            '2026-12-01 10:00:00.123456+00', '2026-12-01 10:00:00.123456+00',
            '2026-12-01 10:00:00.123456+00', '2026-12-01 10:00:01+00'),
           (2, 8, 1, 2, 11, 'created', 'user', 4, '{}', null, null,
            '2026-12-01 10:00:02+00', '2026-12-01 10:00:02+00', '2026-12-01 10:00:02+00',
            '2026-12-01 10:00:03+00'),
           (3, 7, 1, 2, 10, 'updated', 'api_token', 3, '{"40": "b", "41": null}', '{"40": "a"}',
            '{40}', '2026-12-01 10:00:00.123456+00', '2026-12-01 10:00:04+00',
            '2026-12-01 10:00:04+00', '2026-12-01 10:00:05+00'),
           (null, 7, 1, 2, 10, 'deleted', 'system', 0, '{"40": "b", "41": null}',
            '{"40": "b", "41": null}', null, '2026-12-01 10:00:00.123456+00',
            '2026-12-01 10:00:04+00', '2026-12-01 10:00:06+00', null)`,
      );
      await query(em, "update record_change_log set last_position = 3");
      before = await query(em, `select ${COLUMNS} from record_change order by id`);
    },
  );
  expect(await migrateRecords(db.url)).toEqual(appliedFrom("RecordChangeWrites"));
  session = await sessionIn(db.url, SCHEMA);
});

afterAll(async () => {
  await session?.end();
  await drop?.();
});

describe("the change log moved to one row per write", () => {
  it("keeps every change, its position and what it showed", async () => {
    const after = await session.query(
      `select ${COLUMNS} from record_change order by position nulls last`,
    );
    expect(after.rows).toEqual(before);
    const writes = await session.query(
      "select last_position::text as last, size from record_change_write order by id",
    );
    expect(writes.rows).toEqual([
      { last: "1", size: 1 },
      { last: "2", size: 1 },
      { last: "3", size: 1 },
      { last: null, size: 1 },
    ]);
  });

  it("sequences what was waiting, then new writes as blocks after it", async () => {
    expect((await session.query("select record_change_sequence(100) as end")).rows).toEqual([
      { end: "4" },
    ]);
    await session.query(
      `insert into outbox (event_id, subject, payload)
       values (gen_random_uuid(), 'records.changes', convert_to($1, 'UTF8'))`,
      [
        JSON.stringify({
          table_id: "7",
          organization_id: "1",
          database_id: "2",
          actor: { type: "system", id: "0" },
          changes: [
            { type: "created", row_id: "12", data: { "40": "c" } },
            { type: "created", row_id: "13", data: { "40": "d" } },
          ],
        }),
      ],
    );
    expect((await session.query("select record_change_sequence(100) as end")).rows).toEqual([
      { end: "6" },
    ]);
    const log = await session.query(
      `select position::text, row_id::text, type from record_change where table_id = 7
       order by write_position, ordinal`,
    );
    expect(log.rows).toEqual([
      { position: "1", row_id: "10", type: "created" },
      { position: "3", row_id: "10", type: "updated" },
      { position: "4", row_id: "10", type: "deleted" },
      { position: "5", row_id: "12", type: "created" },
      { position: "6", row_id: "13", type: "created" },
    ]);
  });
});
