import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOrm, type Orm, preparedName, query } from "../src/index.js";
import { createTestDatabase, testInfra } from "../src/testing.js";

// One connection, so that every statement below meets the same session's prepared statements.
let orm: Orm;
let drop: () => Promise<void>;

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  drop = db.drop;
  orm = await createOrm({
    url: db.url,
    schema: "kit_sql_test",
    entities: [],
    migrations: [],
    poolSize: 1,
  });
});

afterAll(async () => {
  await orm?.close();
  await drop?.();
});

const PREPARED = "select $1::int + 1 as n";
const ONE_OFF = "select $1::int + 2 as n";

async function preparedStatements(): Promise<{ name: string; statement: string }[]> {
  return query(orm.em.fork(), "select name, statement from pg_prepared_statements order by name");
}

describe("query with prepare", () => {
  it("sends the text as a statement prepared once per connection, and the others unnamed", async () => {
    for (const n of [1, 2, 3]) {
      expect(await query(orm.em.fork(), PREPARED, [n], { prepare: true })).toEqual([{ n: n + 1 }]);
      expect(await query(orm.em.fork(), ONE_OFF, [n])).toEqual([{ n: n + 2 }]);
    }
    expect(await preparedStatements()).toEqual([
      { name: preparedName(PREPARED), statement: PREPARED },
    ]);
  });

  it("prepares again after a transaction that refused the first preparation", async () => {
    const text = "select $1::text || '!' as said";
    await expect(
      orm.em.fork().transactional(async (em) => {
        await query(em, "select 1 / 0").catch(() => undefined);
        // The transaction is aborted: PostgreSQL refuses the Parse of the prepared statement.
        await query(em, text, ["lost"], { prepare: true });
      }),
    ).rejects.toThrow(/aborted/);
    expect((await preparedStatements()).map((s) => s.statement)).not.toContain(text);

    await orm.em.fork().transactional(async (em) => {
      expect(await query(em, text, ["kept"], { prepare: true })).toEqual([{ said: "kept!" }]);
    });
    expect((await preparedStatements()).map((s) => s.statement)).toContain(text);
    expect(await query(orm.em.fork(), text, ["again"], { prepare: true })).toEqual([
      { said: "again!" },
    ]);
  });
});
