// What lookups and rollups cost a page, PostgreSQL alone: a page of 50 projects each linking 20
// tasks, with a rollup (and a lookup), against the same page without them. Not a test (no
// timed assertion anywhere): run by hand, on a machine at rest,
//   npx tsx --conditions=@rowbase/source services/records/test/computed-values-measure.ts
// (PROJECTS=<n> projects, RUNS=<n> round trips a case, ONLY=<text> the cases named so.)
// It makes a database of its own and drops it.

import { query, type SchemaField } from "@rowbase/kit";
import { pageStatement } from "../src/db/reads.js";
import { applyDdl, createLinkJunctionSql, createTableSql } from "../src/db/user-tables/ddl.js";
import { linkJunction, userTable } from "../src/db/user-tables/names.js";
import { listQuery } from "../src/records.js";
import type { TableSchema } from "../src/table-schema.js";
import { openRecordsDatabase } from "./database.js";

const ORGANIZATION = 9n;
const PROJECTS = 90n;
const TASKS = 91n;
const PROJECT_COUNT = Number(process.env.PROJECTS ?? 10_000);
const LINKS_EACH = 20;
const TASK_COUNT = PROJECT_COUNT * 5;
const RUNS = Number(process.env.RUNS ?? 200);

const field = (id: string, name: string, type: SchemaField["type"], options = {}) =>
  ({ id, name, type, options, required: false, description: "" }) as SchemaField;

const TASK_FIELDS = [
  field("20", "Projects", "link", { table_id: 90, multiple: true, inverse_field_id: 2 }),
  field("21", "Title", "text"),
  field("23", "Hours", "number"),
];
const PLAIN = [field("1", "Name", "text"), field("5", "Budget", "number")];
const LINK = field("2", "Tasks", "link", { table_id: 91, multiple: true, inverse_field_id: 20 });
const ROLLUP = field("3", "Hours", "rollup", { link_field_id: 2, field_id: 23, function: "sum" });
const LOOKUP = field("4", "Titles", "lookup", { link_field_id: 2, field_id: 21 });
const LINKED = new Map([[TASKS.toString(), TASK_FIELDS]]);

const schema = (fields: SchemaField[]): TableSchema => ({
  tableId: PROJECTS,
  databaseId: 1n,
  organizationId: ORGANIZATION,
  name: "Projects",
  fields,
});

async function main() {
  const db = await openRecordsDatabase();
  const run = (sql: string, params: readonly unknown[] = []) =>
    query<Record<string, unknown>>(db.orm.em.fork(), sql, params);
  try {
    const stored = (fields: SchemaField[]) => fields.map((f) => ({ ...f, id: BigInt(f.id) }));
    await applyDdl(db.orm.em.fork(), [
      ...createTableSql(ORGANIZATION, PROJECTS, stored([...PLAIN, LINK, ROLLUP, LOOKUP])),
      ...createTableSql(ORGANIZATION, TASKS, stored(TASK_FIELDS)),
      ...createLinkJunctionSql(ORGANIZATION, {
        id: 2n,
        tableId: PROJECTS,
        inverseFieldId: 20n,
        linkedTableId: TASKS,
      }),
    ]);
    await run(
      `insert into ${userTable(ORGANIZATION, PROJECTS)} (row_id, created_by, updated_by, f_1, f_5)
       select n, 'system', 'system', 'Project ' || n, n % 1000 from generate_series(1, $1::int) n`,
      [PROJECT_COUNT],
    );
    await run(
      `insert into ${userTable(ORGANIZATION, TASKS)} (row_id, created_by, updated_by, f_21, f_23)
       select 1000000 + n, 'system', 'system', 'Task ' || n, (n % 97) / 4.0
       from generate_series(1, $1::int) n`,
      [TASK_COUNT],
    );
    const junction = linkJunction(ORGANIZATION, 2n, 20n);
    await run(
      `insert into ${junction.relation} (${junction.own}, ${junction.other})
       select p, 1000000 + 1 + ((p * 7919 + k * 104729) % $2::int)
       from generate_series(1, $1::int) p, generate_series(1, $3::int) k
       on conflict do nothing`,
      [PROJECT_COUNT, TASK_COUNT, LINKS_EACH],
    );
    await run(`vacuum analyze ${junction.relation}`);
    await run(`vacuum analyze ${userTable(ORGANIZATION, PROJECTS)}`);
    await run(`vacuum analyze ${userTable(ORGANIZATION, TASKS)}`);

    const cases: [string, SchemaField[], { where?: string; sort?: string; offset?: number }][] = [
      ["page, no links", PLAIN, {}],
      ["page, link + rollup", [...PLAIN, LINK, ROLLUP], {}],
      ["page, link + rollup + lookup", [...PLAIN, LINK, ROLLUP, LOOKUP], {}],
      ["page 100, no links", PLAIN, { offset: 5000 }],
      ["page 100, link + rollup + lookup", [...PLAIN, LINK, ROLLUP, LOOKUP], { offset: 5000 }],
      ["where (Tasks,has,id)", [...PLAIN, LINK, ROLLUP], { where: "(Tasks,has,1000050)" }],
      ["where (Hours,gt,300)", [...PLAIN, LINK, ROLLUP], { where: "(Hours,gt,300)" }],
      [
        "where (Titles,eq,Task 77)",
        [...PLAIN, LINK, ROLLUP, LOOKUP],
        { where: "(Titles,eq,Task 77)" },
      ],
      ["sort -Budget, no links", PLAIN, { sort: "-Budget" }],
      ["sort -Hours (rollup)", [...PLAIN, LINK, ROLLUP], { sort: "-Hours" }],
      ["sort Tasks (link count)", [...PLAIN, LINK, ROLLUP], { sort: "Tasks" }],
    ];
    for (const [name, fields, params] of cases) {
      if (process.env.ONLY && !name.includes(process.env.ONLY)) continue;
      const page = listQuery(
        schema(fields),
        {
          where: params.where ?? "",
          sort: params.sort ?? "",
          limit: 50,
          offset: params.offset ?? 0,
          count: "none",
        },
        "columns",
        new Set(),
        LINKED,
      );
      const { sql, params: values } = pageStatement(page);
      const alone: number[] = [];
      for (let i = 0; i < 10; i++) {
        const [plan] = await run(`explain (analyze, timing off, format json) ${sql}`, values);
        alone.push((plan!["QUERY PLAN"] as [{ "Execution Time": number }])[0]["Execution Time"]);
      }
      const started = performance.now();
      for (let i = 0; i < RUNS; i++) await run(sql, values);
      const each = (performance.now() - started) / RUNS;
      process.stdout.write(
        `${name.padEnd(36)} alone ${Math.min(...alone).toFixed(2)} ms (best of 10), round trip ${each.toFixed(2)} ms (mean of ${RUNS})\n`,
      );
    }
  } finally {
    await db.close();
  }
}

await main();
