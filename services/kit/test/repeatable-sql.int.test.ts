import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Migration } from "@mikro-orm/migrations";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createOrm, migrate, type Orm, packageDirectory, query } from "../src/index.js";
import { createTestDatabase, testInfra, uniqueName } from "../src/testing.js";

// Repeatable SQL files applied by kit's `migrate` after the ordered migrations, in the same
// transaction, each again whenever its text changes.

/** The table the test's files write to, so that every run of a file shows. */
class CreateRuns extends Migration {
  override up() {
    this.addSql("create table runs (id bigint generated always as identity, file text not null)");
  }
}

const ANSWER = `create or replace function answer() returns int language sql
set search_path from current as $$ select 21 $$;
insert into runs (file) values ('a');
`;
// A SQL function's body is checked when it is made: `answer` must exist, so `a_answer.sql` must
// have run before.
const TWICE = `create or replace function twice() returns int language sql
set search_path from current as $$ select answer() * 2 $$;
insert into runs (file) values ('b');
`;

let databaseUrl: string;
let drop: () => Promise<void>;
const orms: Orm[] = [];
const folders: string[] = [];

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  databaseUrl = db.url;
  drop = db.drop;
});

afterEach(async () => {
  for (const orm of orms.splice(0)) await orm.close();
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

afterAll(async () => {
  await drop?.();
});

/** A schema of its own, an ORM on it and a folder of SQL files holding `files`. */
async function setUp(files: Record<string, string>) {
  const schema = uniqueName("sql");
  const folder = await mkdtemp(join(tmpdir(), "repeatable-sql-"));
  folders.push(folder);
  await writeFiles(folder, files);
  const open = async () => {
    const orm = await createOrm({
      url: databaseUrl,
      schema,
      entities: [],
      migrations: [CreateRuns],
    });
    orms.push(orm);
    return orm;
  };
  const orm = await open();
  const sql = async <R extends object>(text: string) => query<R>(orm.em.fork(), text);
  return {
    schema,
    folder,
    orm,
    open,
    migrate: (on: Orm = orm) => migrate(on, schema, { sql: folder }),
    sql,
    runs: async () =>
      (await sql<{ file: string }>(`select file from "${schema}".runs order by id`)).map(
        (row) => row.file,
      ),
    recorded: async () =>
      sql<{ name: string; checksum: string }>(
        `select name, checksum from "${schema}".repeatable_sql order by name`,
      ),
  };
}

async function writeFiles(folder: string, files: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(files)) await writeFile(join(folder, name), text);
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

describe("migrate with a folder of repeatable SQL", () => {
  it("applies every .sql file after the migrations, in name order, and records its checksum", async () => {
    const t = await setUp({ "b_twice.sql": TWICE, "a_answer.sql": ANSWER, "notes.md": "# no" });
    expect(await t.migrate()).toEqual(["CreateRuns", "a_answer.sql", "b_twice.sql"]);
    expect(await t.sql(`select "${t.schema}".twice() as n`)).toEqual([{ n: 42 }]);
    expect(await t.runs()).toEqual(["a", "b"]);
    expect(await t.recorded()).toEqual([
      { name: "a_answer.sql", checksum: sha256(ANSWER) },
      { name: "b_twice.sql", checksum: sha256(TWICE) },
    ]);
    // The functions keep the schema as their search path, whatever the caller's.
    expect(
      await t.sql(
        `select proname, proconfig from pg_proc
         where pronamespace = '"${t.schema}"'::regnamespace order by proname`,
      ),
    ).toEqual([
      { proname: "answer", proconfig: [`search_path=${t.schema}`] },
      { proname: "twice", proconfig: [`search_path=${t.schema}`] },
    ]);
  });

  it("skips unchanged files and applies a changed one again", async () => {
    const t = await setUp({ "a_answer.sql": ANSWER, "b_twice.sql": TWICE });
    await t.migrate();
    expect(await t.migrate()).toEqual([]);
    expect(await t.runs()).toEqual(["a", "b"]);

    const changed = ANSWER.replace("select 21", "select 50");
    await writeFiles(t.folder, { "a_answer.sql": changed });
    expect(await t.migrate()).toEqual(["a_answer.sql"]);
    expect(await t.sql(`select "${t.schema}".twice() as n`)).toEqual([{ n: 100 }]);
    expect(await t.runs()).toEqual(["a", "b", "a"]);
    expect(await t.recorded()).toEqual([
      { name: "a_answer.sql", checksum: sha256(changed) },
      { name: "b_twice.sql", checksum: sha256(TWICE) },
    ]);

    // A new file is applied alone.
    await writeFiles(t.folder, { "c_more.sql": "insert into runs (file) values ('c');" });
    expect(await t.migrate()).toEqual(["c_more.sql"]);
    expect(await t.runs()).toEqual(["a", "b", "a", "c"]);
  });

  it("leaves nothing of a run whose file fails: neither the migrations nor the files before it", async () => {
    const t = await setUp({ "a_answer.sql": ANSWER, "b_twice.sql": "create function broken(" });
    await expect(t.migrate()).rejects.toThrow(/syntax error/);
    expect(
      await t.sql(
        `select
           to_regclass('"${t.schema}".runs') as runs,
           to_regclass('"${t.schema}".repeatable_sql') as recorded,
           to_regprocedure('"${t.schema}".answer()') as answer,
           (select count(*)::int from "${t.schema}".mikro_orm_migrations) as migrations`,
      ),
    ).toEqual([{ runs: null, recorded: null, answer: null, migrations: 0 }]);

    await writeFiles(t.folder, { "b_twice.sql": TWICE });
    expect(await t.migrate()).toEqual(["CreateRuns", "a_answer.sql", "b_twice.sql"]);
    expect(await t.runs()).toEqual(["a", "b"]);
  });

  it("lets two replicas migrating at once take turns: the second finds the work done", async () => {
    const t = await setUp({ "a_answer.sql": ANSWER, "b_twice.sql": TWICE });
    const other = await t.open();
    const results = await Promise.all([t.migrate(), t.migrate(other), t.migrate(await t.open())]);
    expect(results.map((names) => names.length).sort()).toEqual([0, 0, 3]);
    expect(results.find((names) => names.length > 0)).toEqual([
      "CreateRuns",
      "a_answer.sql",
      "b_twice.sql",
    ]);
    expect(await t.runs()).toEqual(["a", "b"]);
  });
});

describe("packageDirectory", () => {
  it("finds the directory holding the module's package.json", () => {
    expect(packageDirectory(import.meta.url)).toBe(join(import.meta.dirname, ".."));
  });
});
