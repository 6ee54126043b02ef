import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { lz4CompressionSql } from "../src/index.js";
import { createTestDatabase, testInfra } from "../src/testing.js";

// The columns a migration names compress their large values with lz4 from then on, and the
// values written before stay readable.

let client: pg.Client;
let drop: () => Promise<void>;

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  drop = db.drop;
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await drop?.();
});

/** How PostgreSQL stored the `n`th value of `t.doc` ('pglz', 'lz4', or null when uncompressed). */
async function compressionOf(n: number): Promise<string | null> {
  const { rows } = await client.query<{ method: string | null }>(
    "select pg_column_compression(doc) as method from t where id = $1",
    [n],
  );
  return rows[0]!.method;
}

it("has PostgreSQL compress the named columns' large values with lz4", async () => {
  await client.query("create table t (id int primary key, doc jsonb, note text)");
  // A JSON array of about 300 KB, as a batch write's changes are.
  const doc = JSON.stringify(
    Array.from({ length: 3000 }, (_, i) => ({ key: `f${i}`, new: `value ${i} `.repeat(8) })),
  );
  await client.query("insert into t values (1, $1, $2)", [doc, "x".repeat(100_000)]);

  await client.query(lz4CompressionSql(["t.doc"]));
  await client.query("insert into t values (2, $1, $2)", [doc, "x".repeat(100_000)]);

  const { rows: columns } = await client.query<{ attname: string; attcompression: string }>(
    `select attname, attcompression from pg_attribute
     where attrelid = 't'::regclass and attname in ('doc', 'note') order by attname`,
  );
  expect(columns).toEqual([
    { attname: "doc", attcompression: "l" },
    { attname: "note", attcompression: "" },
  ]);
  expect(await compressionOf(1)).toBe("pglz");
  expect(await compressionOf(2)).toBe("lz4");
  const { rows } = await client.query<{ same: boolean }>(
    "select (select doc from t where id = 1) = (select doc from t where id = 2) as same",
  );
  expect(rows[0]!.same).toBe(true);
});
