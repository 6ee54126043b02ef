import { type CallContext, createLogger, type Orm, query } from "@rowbase/kit";
import { createTestDatabase, testInfra } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Transactions } from "../src/change-set.js";
import { Cleanup } from "../src/cleanup.js";
import { createFilesOrm, migrateFiles } from "../src/service.js";

// A deleted scope's files a chunk per transaction (`deleteScopesInChunks`), before the event's
// own transaction. How the consumers run it, with real uploads, is in suite.ts ("deletion
// sagas").

let orm: Orm;
let drop: () => Promise<void>;
/** The storage keys handed to the collector, one list per committed transaction. */
const handed: string[][] = [];
let cleanup: Cleanup;
const CONTEXT: CallContext = { principal: undefined, requestId: "chunks-test" };

let nextRow = 1;

/** A live file of `size` bytes in (organization, table, field); returns its storage key. */
async function file(organizationId: number, tableId: number, fieldId: number, size: number) {
  const key = `key-${tableId}-${fieldId}-${nextRow}`;
  await query(
    orm.em.fork(),
    `insert into file (row_id, field_id, table_id, organization_id, file_name, content_type,
       size, sha256, storage_key)
     values ($1, $2, $3, $4, 'a.txt', 'text/plain', $5, repeat('0', 64), $6)`,
    [nextRow++, fieldId, tableId, organizationId, size, key],
  );
  await query(
    orm.em.fork(),
    `insert into storage_usage (organization_id, file_storage_bytes) values ($1, $2)
     on conflict (organization_id)
     do update set file_storage_bytes = storage_usage.file_storage_bytes + excluded.file_storage_bytes`,
    [organizationId, size],
  );
  return key;
}

async function keysWhere(where: string, id: number): Promise<string[]> {
  const rows = await query<{ storage_key: string }>(
    orm.em.fork(),
    `select storage_key from file where ${where} = $1 order by storage_key`,
    [id],
  );
  return rows.map((row) => row.storage_key);
}

async function usage(organizationId: number): Promise<number | undefined> {
  const [row] = await query<{ bytes: string }>(
    orm.em.fork(),
    "select file_storage_bytes as bytes from storage_usage where organization_id = $1",
    [organizationId],
  );
  return row ? Number(row.bytes) : undefined;
}

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  drop = db.drop;
  await migrateFiles(db.url);
  orm = await createFilesOrm(db.url);
  const tx = new Transactions(
    orm,
    { kick: () => {} },
    createLogger("files-test", "silent"),
    (keys) => handed.push(keys),
  );
  cleanup = new Cleanup(tx);
});

afterAll(async () => {
  await orm?.close();
  await drop?.();
});

describe("a deleted scope's files in chunks", () => {
  it("deletes a table's files a chunk per transaction, with their usage and bytes", async () => {
    const keys = [];
    for (let i = 0; i < 5; i++) keys.push(await file(1, 10, 100 + (i % 2), 10 + i));
    const kept = await file(1, 11, 102, 100);
    expect(await usage(1)).toBe(10 + 11 + 12 + 13 + 14 + 100);
    handed.length = 0;

    expect(await cleanup.deleteScopesInChunks(CONTEXT, "table", [10n], 2)).toBe(5);
    // Two, two and one: each chunk committed on its own, its bytes handed over after it.
    expect(handed.map((chunk) => chunk.length)).toEqual([2, 2, 1]);
    expect(handed.flat().sort()).toEqual([...keys].sort());
    expect(await keysWhere("table_id", 10)).toEqual([]);
    expect(await keysWhere("table_id", 11)).toEqual([kept]);
    expect(await usage(1)).toBe(100);
    const queued = await query<{ storage_key: string }>(
      orm.em.fork(),
      "select storage_key from blob_gc order by storage_key",
    );
    expect(queued.map((row) => row.storage_key)).toEqual([...keys].sort());
    // The mark that refuses uploads to the table was committed first.
    const marks = await query(orm.em.fork(), "select kind, id from deleted_scope");
    expect(marks).toEqual([{ kind: "table", id: "10" }]);

    // Again (a redelivery): nothing left, nothing handed over.
    handed.length = 0;
    expect(await cleanup.deleteScopesInChunks(CONTEXT, "table", [10n], 2)).toBe(0);
    expect(handed).toEqual([]);
    expect(await usage(1)).toBe(100);
  });

  it("deletes an organization's files across its tables, and a field's only its own", async () => {
    await file(2, 20, 200, 1);
    await file(2, 21, 201, 2);
    await file(2, 21, 202, 3);
    await file(3, 30, 300, 4);
    expect(await cleanup.deleteScopesInChunks(CONTEXT, "field", [202n], 1)).toBe(1);
    expect(await keysWhere("field_id", 202)).toEqual([]);
    expect(await keysWhere("table_id", 21)).toHaveLength(1);
    expect(await usage(2)).toBe(3);

    expect(await cleanup.deleteScopesInChunks(CONTEXT, "organization", [2n], 1)).toBe(2);
    expect(await keysWhere("organization_id", 2)).toEqual([]);
    expect(await usage(2)).toBe(0);
    expect(await keysWhere("organization_id", 3)).toHaveLength(1);
    expect(await usage(3)).toBe(4);
  });
});
