import { type Orm, query } from "@rowbase/kit";
import { createTestDatabase, migrateBefore, sessionIn, testInfra } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrations } from "../src/migrations/initial-schema.js";
import { createOrganizationOrm, migrateOrganization, SCHEMA } from "../src/service.js";

// `audit_count` (migration AuditCounts): the events of each scope per UTC hour and action, kept
// by triggers on `audit_event` in the writing transaction, against what count(*) says. How a
// list sums them is tested through the service in audit-log.int.test.ts.

let orm: Orm;
let url: string;
let drop: () => Promise<void>;

/**
 * Events in one statement, of the organizations `$1` at the instants `$2` (database
 * `organization * 10`, table `organization * 100`, some in neither).
 */
const INSERT = `insert into audit_event (event_id, at, organization_id, database_id, table_id,
    actor_type, actor_id, action, target_type, target_id)
  select gen_random_uuid()::text, at, org, case when i % 3 > 0 then org * 10 end,
    case when i % 3 = 2 then org * 100 end, 'user', 1,
    case when i % 2 = 0 then 'record.created' else 'record.updated' end, 'record', i
  from unnest($1::bigint[], $2::timestamptz[]) with ordinality as e(org, at, i)`;

/** INSERT's parameters: events of `organization`, `count` of them from `start`, `stepMinutes` apart. */
function events(organization: number, start: string, count: number, stepMinutes: number) {
  const first = new Date(start).getTime();
  const ats = Array.from({ length: count }, (_, i) =>
    new Date(first + i * stepMinutes * 60_000).toISOString(),
  );
  return [ats.map(() => organization), ats];
}

const GROUPS = `v.scope, v.scope_id, e.organization_id, date_trunc('hour', e.at, 'UTC') as hour,
  e.action`;
const SCOPES = `lateral (values ('organization', e.organization_id), ('database', e.database_id),
  ('table', e.table_id)) as v(scope, scope_id)`;

/** The kept counts, but for those that are 0. */
async function counted(): Promise<string[]> {
  const rows = await query<{ row: string }>(
    orm.em.fork(),
    `select concat_ws(' ', scope, scope_id, organization_id, hour, action, n) as row
     from audit_count where n <> 0 order by 1`,
  );
  return rows.map((r) => r.row);
}

/** What counting the events says. */
async function actual(): Promise<string[]> {
  const rows = await query<{ row: string }>(
    orm.em.fork(),
    `select concat_ws(' ', scope, scope_id, organization_id, hour, action, n) as row
     from (select ${GROUPS}, count(*) as n from audit_event e, ${SCOPES}
           where v.scope_id is not null group by 1, 2, 3, 4, 5) c
     order by 1`,
  );
  return rows.map((r) => r.row);
}

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  url = db.url;
  drop = db.drop;
  await migrateBefore({ url, schema: SCHEMA, entities: [], migrations }, "AuditCounts", (old) =>
    query(old.em.fork(), INSERT, events(1, "2026-11-20T09:10:00Z", 30, 7)),
  );
  const names = migrations.map((migration) => migration.name);
  expect(await migrateOrganization(url)).toEqual(names.slice(names.indexOf("AuditCounts")));
  orm = await createOrganizationOrm(url);
});

afterAll(async () => {
  await orm?.close();
  await drop?.();
});

describe("audit_count", () => {
  it("starts from the events stored before the migration", async () => {
    const kept = await counted();
    // Three hours of two actions, in the organization, its database and its table.
    expect(kept.filter((row) => row.startsWith("organization 1 1 "))).toHaveLength(8);
    expect(kept.some((row) => row.startsWith("database 10 1 "))).toBe(true);
    expect(kept.some((row) => row.startsWith("table 100 1 "))).toBe(true);
    expect(kept).toEqual(await actual());
  });

  it("follows inserts, changed times and actions, and deletes", async () => {
    const em = orm.em.fork();
    await query(em, INSERT, events(2, "2026-11-21T23:59:59.998Z", 5, 0.001 / 60));
    await query(em, INSERT, events(1, "2026-11-20T10:00:00Z", 20, 1));
    // Events moved to other hours (and partitions) and renamed; one statement over two
    // organizations; a delete of part of an hour, and one that deletes nothing.
    await query(
      em,
      `update audit_event set at = at - interval '3 days', action = 'record.deleted'
       where target_id % 4 = 0`,
    );
    await query(em, "delete from audit_event where organization_id = 1 and target_id % 5 = 0");
    await query(em, "delete from audit_event where organization_id = 999");
    expect(await counted()).toEqual(await actual());
    expect((await counted()).some((row) => row.includes(" record.deleted "))).toBe(true);
  });

  it("leaves nothing of a rolled-back write", async () => {
    const before = await counted();
    await expect(
      orm.em.fork().transactional(async (em) => {
        await query(em, INSERT, events(3, "2026-11-22T08:00:00Z", 10, 10));
        await query(em, "delete from audit_event where organization_id = 1");
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");
    expect(await counted()).toEqual(before);
  });

  it("keeps every event of writers racing on the same hours, without a deadlock", async () => {
    const clients = await Promise.all(Array.from({ length: 8 }, () => sessionIn(url, SCHEMA)));
    try {
      // Each writer stores events of the same two organizations and hours in one statement,
      // the organizations in its own order, and holds their count rows a moment before it
      // commits.
      await Promise.all(
        clients.map(async (client, writer) => {
          for (let round = 0; round < 10; round++) {
            const [first, second] = (writer + round) % 2 === 0 ? [4, 5] : [5, 4];
            const [orgs1, ats1] = events(first, "2026-11-23T10:30:00Z", 6, 20 + writer);
            const [orgs2, ats2] = events(second, "2026-11-23T10:30:00Z", 6, 20 + writer);
            await client.query("begin");
            await client.query(INSERT, [orgs1.concat(orgs2), ats1.concat(ats2)]);
            await client.query("select pg_sleep(0.002)");
            await client.query("commit");
          }
        }),
      );
    } finally {
      await Promise.all(clients.map((client) => client.end()));
    }
    const kept = await counted();
    const organization4 = kept.filter((row) => row.startsWith("organization 4 4 "));
    expect(organization4.reduce((sum, row) => sum + Number(row.split(" ").at(-1)), 0)).toBe(
      8 * 10 * 6,
    );
    expect(kept).toEqual(await actual());
  });
});
