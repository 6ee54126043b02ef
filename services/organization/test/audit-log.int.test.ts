import { create, toBinary, toJson } from "@bufbuild/protobuf";
import { TimestampSchema, timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type AuditChange,
  auditChangesJson,
  compactAuditEventId,
  compactAuditEvents,
  createLogger,
  isCancelledStatement,
  listReads,
  openReadPool,
  type ReadStatement,
  SUBJECTS,
} from "@rowbase/kit";
import {
  AuditEvent_TargetSchema,
  AuditEventBatchSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  Actor_Type,
  ActorSchema,
  EventMetaSchema,
} from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import {
  type AuditLogEntry,
  AuditLogEntry_Actor_Type,
  Role,
  TokenAccess,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { ListAuditEventsRequest } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuditLog, type AuditScope } from "../src/audit-log.js";
import { Transactions } from "../src/change-set.js";
import { DURABLES } from "../src/event-consumers.js";
import { createOrganizationOrm } from "../src/service.js";
import {
  as,
  type Harness,
  newOrganization,
  reasonOf,
  startHarness,
  type TestUser,
  team,
  validationOf,
} from "./harness.js";

const DAY_MS = 24 * 3600 * 1000;

type Scope = ListAuditEventsRequest["scope"];
const byOrganization = (value: bigint): Scope => ({ case: "organizationId", value });
const byDatabase = (value: bigint): Scope => ({ case: "databaseId", value });
const byTable = (value: bigint): Scope => ({ case: "tableId", value });

async function list(
  harness: Harness,
  who: TestUser,
  scope: Scope,
  params: Partial<Omit<ListAuditEventsRequest, "scope" | "$typeName">> = {},
) {
  return harness.org.listAuditEvents({ scope, limit: 1000, ...params }, await as(who));
}

/** What a change says, in plain JSON (old/new absent when unset). */
function changesOf(entry: AuditLogEntry | undefined) {
  return entry?.changes.map((change) => ({
    key: change.key,
    ...(change.label ? { label: change.label } : {}),
    ...(change.oldValue ? { old: toJson(ValueSchema, change.oldValue) } : {}),
    ...(change.newValue ? { new: toJson(ValueSchema, change.newValue) } : {}),
  }));
}

interface AuditInit {
  organizationId: bigint;
  databaseId?: bigint;
  tableId?: bigint;
  action: string;
  target: { type: string; id: bigint };
  actor: TestUser;
  changes?: AuditChange[];
  at?: Date;
}

/** An AuditEvent with a new id, and encoded. */
function auditEventOf(init: AuditInit) {
  const eventId = crypto.randomUUID();
  const event = create(AuditEventSchema, {
    meta: create(EventMetaSchema, {
      eventId,
      occurredAt: timestampFromDate(init.at ?? new Date()),
      actor: create(ActorSchema, { type: Actor_Type.USER, id: init.actor.id }),
      requestId: "test",
    }),
    organizationId: init.organizationId,
    databaseId: init.databaseId ?? 0n,
    tableId: init.tableId ?? 0n,
    action: init.action,
    target: create(AuditEvent_TargetSchema, init.target),
    changesJson: auditChangesJson(init.changes ?? []),
  });
  return { eventId, action: init.action, event, payload: toBinary(AuditEventSchema, event) };
}

/** Publishes an AuditEvent as another service (catalog, records) would; returns its id. */
async function publishAudit(harness: Harness, init: AuditInit): Promise<string> {
  const { eventId, payload } = auditEventOf(init);
  await harness.bus.publish(SUBJECTS.audit(init.action), payload, eventId);
  return eventId;
}

/** Waits until the store holds the event. */
async function stored(harness: Harness, eventId: string) {
  await expect
    .poll(
      async () =>
        (
          await harness.db.query(
            "select count(*)::int as n from organization.audit_event where event_id = $1",
            [eventId],
          )
        ).rows[0].n,
      { timeout: 10_000 },
    )
    .toBe(1);
}

/**
 * Without CATALOG_GRPC_URL: database and table scopes resolve from the stored events only. How
 * they resolve through the real catalog (a live database without events, a non-member) is tested
 * against the running system in test/e2e/audit-routes.e2e.test.ts.
 */
let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

describe("organization changes", () => {
  it("lists member, invite and token changes with actor, target and old/new values", async () => {
    const { id, owner, admin, editor, viewer, outsider, memberOf } = await team(h);
    await h.org.updateMember(
      { organizationId: id, memberId: memberOf(editor), role: Role.VIEWER },
      await as(admin),
    );
    const { apiToken } = await h.org.createApiToken(
      { organizationId: id, name: "CI", access: TokenAccess.READ_WRITE },
      await as(owner),
    );
    await h.org.updateOrganization({ organizationId: id, name: "Team Renamed" }, await as(owner));

    await expect
      .poll(async () => (await list(h, viewer, byOrganization(id))).events[0]?.action, {
        timeout: 10_000,
      })
      .toBe("organization.updated");
    const { events, total } = await list(h, viewer, byOrganization(id));
    expect(Number(total)).toBe(events.length);
    const times = events.map((e) => e.at!.seconds * 1000n + BigInt(e.at!.nanos / 1e6));
    expect([...times].sort((a, b) => (a > b ? -1 : a < b ? 1 : 0))).toEqual(times);

    const memberUpdated = events.find((e) => e.action === "member.updated");
    expect(memberUpdated).toMatchObject({
      organizationId: id,
      databaseId: 0n,
      tableId: 0n,
      actor: { type: AuditLogEntry_Actor_Type.USER, id: admin.id },
      target: { type: "member", id: memberOf(editor) },
    });
    expect(memberUpdated!.eventId).toMatch(/^[0-9a-f-]{36}$/);
    expect(changesOf(memberUpdated)).toEqual([{ key: "role", old: "editor", new: "viewer" }]);

    const invite = events.find(
      (e) => e.action === "invite.created" && changesOf(e)?.[0]?.new === admin.email,
    );
    expect(invite).toMatchObject({
      actor: { type: AuditLogEntry_Actor_Type.USER, id: owner.id },
      target: { type: "invite" },
    });
    expect(changesOf(invite)).toEqual([
      { key: "email", new: admin.email },
      { key: "role", new: "admin" },
      { key: "expires_at", new: expect.any(String) },
    ]);

    const token = events.find((e) => e.action === "api_token.created");
    expect(token).toMatchObject({ target: { type: "api_token", id: apiToken!.tokenId } });
    expect(changesOf(token)).toEqual([
      { key: "name", new: "CI" },
      { key: "access", new: "read_write" },
      { key: "token_prefix", new: apiToken!.tokenPrefix },
    ]);
    expect(changesOf(events[0])).toEqual([{ key: "name", old: "Team", new: "Team Renamed" }]);
    // Three invites accepted, plus the owner at the start.
    expect(events.filter((e) => e.action === "member.added")).toHaveLength(4);
    expect(events.filter((e) => e.action === "invite.accepted")).toHaveLength(3);

    expect(await reasonOf(list(h, outsider, byOrganization(id)))).toBe("organization_not_found");
    expect(await reasonOf(list(h, outsider, byOrganization(999_999_999n)))).toBe(
      "organization_not_found",
    );
  });

  it("pages newest first, filters by action and time, and validates its parameters", async () => {
    const owner = await h.user("Pager");
    const { organizationId } = await newOrganization(h, owner, "Pages");
    for (const name of ["One", "Two", "Three"]) {
      await h.org.createApiToken(
        { organizationId, name, access: TokenAccess.READ },
        await as(owner),
      );
    }
    const scope = byOrganization(organizationId);
    // organization.created, member.added (the owner), three tokens.
    await expect
      .poll(async () => (await list(h, owner, scope)).total, { timeout: 10_000 })
      .toBe(5n);
    const all = (await list(h, owner, scope)).events;
    expect(all.slice(0, 3).map((e) => changesOf(e)?.[0]?.new)).toEqual(["Three", "Two", "One"]);

    const page1 = await list(h, owner, scope, { limit: 2 });
    const page2 = await list(h, owner, scope, { limit: 2, offset: 2 });
    const page3 = await list(h, owner, scope, { limit: 2, offset: 4 });
    const beyond = await list(h, owner, scope, { limit: 2, offset: 10 });
    expect([page1, page2, page3, beyond].map((p) => p.total)).toEqual([5n, 5n, 5n, 5n]);
    expect([...page1.events, ...page2.events, ...page3.events].map((e) => e.eventId)).toEqual(
      all.map((e) => e.eventId),
    );
    expect(beyond.events).toEqual([]);

    const tokens = await list(h, owner, scope, { action: "api_token.created" });
    expect(tokens.total).toBe(3n);
    expect(tokens.events.every((e) => e.action === "api_token.created")).toBe(true);
    expect((await list(h, owner, scope, { action: "record.updated" })).total).toBe(0n);

    // since is inclusive, until exclusive.
    const second = all[1]!;
    const since = await list(h, owner, scope, { since: second.at });
    expect(since.events.map((e) => e.eventId)).toEqual(all.slice(0, 2).map((e) => e.eventId));
    const until = await list(h, owner, scope, { until: second.at });
    expect(until.events.map((e) => e.eventId)).toEqual(all.slice(2).map((e) => e.eventId));

    expect(await validationOf(list(h, owner, scope, { limit: 1001 }))).toEqual([
      { key: "limit", message: "must be 1-1000", source: "query", code: "out_of_range" },
    ]);
    expect(await validationOf(list(h, owner, scope, { limit: -1, offset: -1 }))).toEqual([
      { key: "limit", message: "must be 1-1000", source: "query", code: "out_of_range" },
      { key: "offset", message: "must be 0 or more", source: "query", code: "out_of_range" },
    ]);
    expect(await validationOf(list(h, owner, scope, { action: "drop table" }))).toMatchObject([
      { key: "action" },
    ]);
    expect(
      await validationOf(list(h, owner, scope, { since: second.at, until: second.at })),
    ).toMatchObject([{ key: "until" }]);
    // The last instant of year 9999, to the nanosecond: a bound, not year 10000.
    const lastInstant = create(TimestampSchema, { seconds: 253_402_300_799n, nanos: 999_999_999 });
    expect((await list(h, owner, scope, { until: lastInstant })).total).toBe(BigInt(all.length));
    expect((await list(h, owner, scope, { since: lastInstant })).events).toEqual([]);
    const past = create(TimestampSchema, { seconds: 253_402_300_800n, nanos: 0 });
    expect(await validationOf(list(h, owner, scope, { since: past }))).toEqual([
      {
        key: "since",
        message: "must be a time in the years 1 to 9999",
        source: "query",
        code: "out_of_range",
      },
    ]);
    expect(await validationOf(list(h, owner, { case: undefined }))).toMatchObject([
      { key: "organization_id", source: "query" },
    ]);
  });
});

describe("totals", () => {
  it("counts exactly wherever a range falls on the hours, in every scope and with an action", async () => {
    const owner = await h.user("Counter");
    const { organizationId } = await newOrganization(h, owner, "Counts");
    // organization.created and member.added (the owner) first, so that nothing arrives meanwhile.
    await expect
      .poll(async () => (await list(h, owner, byOrganization(organizationId))).total, {
        timeout: 10_000,
      })
      .toBe(2n);
    const databaseId = 10_000n * organizationId + 7n;
    const tableId = databaseId + 1n;
    const HOUR_MS = 3_600_000;
    const now = Date.now();
    const hourOf = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS;
    // 40 events 37 minutes apart over the last day, and three on the hour; stored by another
    // writer (the kept counts come from the triggers, whoever writes).
    const ats = [
      ...Array.from({ length: 40 }, (_, i) => now - 60_000 - i * 37 * 60_000),
      hourOf(now) - 5 * HOUR_MS,
      hourOf(now) - 5 * HOUR_MS,
      hourOf(now),
    ].filter((at) => at < now);
    await h.db.query(
      `insert into organization.audit_event (event_id, at, organization_id, database_id,
         table_id, actor_type, actor_id, action, target_type, target_id)
       select gen_random_uuid()::text, at, $1, case when i % 3 > 0 then $2::bigint end,
         case when i % 3 = 2 then $3::bigint end, 'user', $4,
         case when i % 2 = 0 then 'record.created' else 'record.updated' end, 'record', i
       from unnest($5::timestamptz[]) with ordinality as e(at, i)`,
      [organizationId, databaseId, tableId, owner.id, ats.map((at) => new Date(at))],
    );
    const counted = async (column: string, id: bigint, since?: Date, until?: Date, action = "") => {
      const { rows } = await h.db.query(
        `select count(*)::int as n from organization.audit_event
         where ${column} = $1 and at >= coalesce($2::timestamptz, '-infinity') and at < coalesce($3::timestamptz, 'infinity')
           and ($4::text = '' or action = $4::text)`,
        [id, since ?? null, until ?? null, action],
      );
      return BigInt(rows[0].n);
    };
    // Bounds on the hour, a millisecond off it, inside an hour, and unset.
    const bounds = [
      undefined,
      hourOf(now) - 10 * HOUR_MS,
      hourOf(now) - 10 * HOUR_MS + 1,
      hourOf(now) - 5 * HOUR_MS,
      now - 5 * HOUR_MS - 17 * 60_000,
      hourOf(now) - 3 * HOUR_MS - 1,
      now - 30 * 60_000,
      hourOf(now),
      hourOf(now) + 2 * HOUR_MS,
    ].map((ms) => (ms === undefined ? undefined : new Date(ms)));
    const scopes = [
      { scope: byOrganization(organizationId), column: "organization_id", id: organizationId },
      { scope: byDatabase(databaseId), column: "database_id", id: databaseId },
      { scope: byTable(tableId), column: "table_id", id: tableId },
    ];
    let checked = 0;
    for (const { scope, column, id } of scopes) {
      for (const since of bounds) {
        for (const until of bounds) {
          if (since && until && until <= since) continue;
          for (const action of scope.case === "organizationId" ? ["", "record.updated"] : [""]) {
            const page = await list(h, owner, scope, {
              ...(since ? { since: timestampFromDate(since) } : {}),
              ...(until ? { until: timestampFromDate(until) } : {}),
              action,
            });
            const expected = await counted(column, id, since, until, action);
            expect({ scope: scope.case, since, until, action, total: page.total }).toEqual({
              scope: scope.case,
              since,
              until,
              action,
              total: expected,
            });
            expect(BigInt(page.events.length)).toBe(expected);
            checked += expected > 0n ? 1 : 0;
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(50);
  });
});

describe("database and table scopes, without a catalog", () => {
  it("returns 50 events when no limit is given", async () => {
    const owner = await h.user("Busy");
    const { organizationId } = await newOrganization(h, owner, "Busy");
    const tableId = 10_000n * organizationId + 77n;
    let lastId = "";
    for (let i = 0; i < 55; i++) {
      lastId = await publishAudit(h, {
        organizationId,
        databaseId: tableId - 1n,
        tableId,
        action: "record.created",
        target: { type: "record", id: BigInt(i + 1) },
        actor: owner,
      });
    }
    await stored(h, lastId);
    await expect
      .poll(async () => (await list(h, owner, byTable(tableId))).total, { timeout: 10_000 })
      .toBe(55n);
    const page = await h.org.listAuditEvents(
      { scope: byTable(tableId), limit: 0 },
      await as(owner),
    );
    expect(page.events).toHaveLength(50);
    expect(page.total).toBe(55n);
  });

  it("resolves database and table scopes from the stored events only", async () => {
    const owner = await h.user("Bare");
    const outsider = await h.user("Other");
    const { organizationId } = await newOrganization(h, owner, "Bare");
    const databaseId = 10_000n * organizationId + 5n;
    const eventId = await publishAudit(h, {
      organizationId,
      databaseId,
      tableId: databaseId + 1n,
      action: "table.updated",
      target: { type: "table", id: databaseId + 1n },
      actor: owner,
      changes: [{ key: "name", old: "A", new: "B" }],
    });
    await stored(h, eventId);
    expect((await list(h, owner, byDatabase(databaseId))).total).toBe(1n);
    expect((await list(h, owner, byTable(databaseId + 1n))).total).toBe(1n);
    expect(await reasonOf(list(h, outsider, byDatabase(databaseId)))).toBe("database_not_found");
    // Nothing stored and nobody to ask: not found, members included.
    expect(await reasonOf(list(h, owner, byDatabase(databaseId + 100n)))).toBe(
      "database_not_found",
    );
  });
});

describe("retention", () => {
  async function auditRows(organizationId: bigint): Promise<string[]> {
    const { rows } = await h.db.query(
      "select event_id from organization.audit_event where organization_id = $1 order by at",
      [organizationId],
    );
    return rows.map((r) => r.event_id);
  }

  /** The organization's kept counts (audit_count) of hours wholly past the 90 days. */
  async function expiredCounts(organizationId: bigint): Promise<number> {
    const { rows } = await h.db.query(
      `select count(*)::int as n from organization.audit_count
       where organization_id = $1 and hour + interval '1 hour' <= now() - interval '90 days'`,
      [organizationId],
    );
    return rows[0].n;
  }

  it("keeps 90 days: older events are hidden, then deleted by the retention job", async () => {
    const owner = await h.user("Keeper");
    const { organizationId } = await newOrganization(h, owner, "Keeper");
    const ids: string[] = [];
    for (const name of ["old", "recent", "new"]) {
      ids.push(
        await publishAudit(h, {
          organizationId,
          action: "organization.updated",
          target: { type: "organization", id: organizationId },
          actor: owner,
          changes: [{ key: "name", new: name }],
        }),
      );
    }
    for (const id of ids) await stored(h, id);
    const [old, recent, fresh] = ids as [string, string, string];
    await h.db.query(
      "update organization.audit_event set at = now() - interval '100 days' where event_id = $1",
      [old],
    );
    await h.db.query(
      "update organization.audit_event set at = now() - interval '89 days' where event_id = $1",
      [recent],
    );
    const listed = async () =>
      (await list(h, owner, byOrganization(organizationId))).events.map((e) => e.eventId);
    // Past 90 days an event is no longer listed, even before the job removed it, nor counted.
    expect(await listed()).not.toContain(old);
    expect(await listed()).toContain(recent);
    expect(await auditRows(organizationId)).toContain(old);
    const page = await list(h, owner, byOrganization(organizationId));
    expect(page.total).toBe(BigInt(page.events.length));
    expect(await expiredCounts(organizationId)).toBe(1);

    const result = await h.service.auditLog.expire();
    expect(result.deletedRows).toBeGreaterThanOrEqual(1);
    const left = await auditRows(organizationId);
    expect(left).not.toContain(old);
    expect(left).toEqual(expect.arrayContaining([recent, fresh]));
    expect(await expiredCounts(organizationId)).toBe(0);
    // The total still matches what is listed (the organization's own events may land meanwhile).
    const after = await list(h, owner, byOrganization(organizationId));
    expect(after.total).toBe(BigInt(after.events.length));
    expect(after.events.map((e) => e.eventId)).not.toContain(old);
  });

  it("drops whole monthly partitions past the cutoff, and keeps this month's and the next", async () => {
    const partitions = async () =>
      (
        await h.db.query(
          `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
           where i.inhparent = 'organization.audit_event'::regclass order by 1`,
        )
      ).rows.map((r) => r.name as string);
    const month = (at: Date) =>
      `audit_event_p${at.getUTCFullYear()}${String(at.getUTCMonth() + 1).padStart(2, "0")}`;
    const now = new Date();
    const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    expect(await partitions()).toEqual(
      expect.arrayContaining(["audit_event_default", month(now), month(next)]),
    );

    const longAgo = new Date(now.getTime() - 150 * DAY_MS);
    expect(await h.service.auditLog.ensurePartition(longAgo)).toBe(true);
    expect(await h.service.auditLog.ensurePartition(longAgo)).toBe(false);
    const owner = await h.user("Archivist");
    const { organizationId } = await newOrganization(h, owner, "Archive");
    await h.db.query(
      `insert into organization.audit_event (event_id, at, organization_id, actor_type, actor_id,
         action, target_type, target_id)
       values ('archived', $1, $2, 'user', $3, 'organization.updated', 'organization', $2)`,
      [longAgo, organizationId, owner.id],
    );
    const { rows } = await h.db.query(
      "select tableoid::regclass::text as part from organization.audit_event where event_id = 'archived'",
    );
    expect(rows[0].part).toMatch(new RegExp(`${month(longAgo)}$`));
    expect(await expiredCounts(organizationId)).toBe(1);

    const result = await h.service.auditLog.expire();
    expect(result.droppedPartitions).toContain(month(longAgo));
    expect(await partitions()).not.toContain(month(longAgo));
    expect(await partitions()).toEqual(expect.arrayContaining([month(now), month(next)]));
    expect(await auditRows(organizationId)).not.toContain("archived");
    // Dropping a partition fires no trigger: the expiry removes the hours' counts itself.
    expect(await expiredCounts(organizationId)).toBe(0);
  });

  it("does not store an event delivered after its 90 days", async () => {
    const owner = await h.user("Late");
    const { organizationId } = await newOrganization(h, owner, "Late");
    const late = await publishAudit(h, {
      organizationId,
      action: "organization.updated",
      target: { type: "organization", id: organizationId },
      actor: owner,
      at: new Date(Date.now() - 91 * DAY_MS),
    });
    await expect
      .poll(
        async () =>
          (
            await h.db.query(
              `select count(*)::int as n from organization.processed_event
               where consumer = 'organization_audit' and event_id = $1`,
              [late],
            )
          ).rows[0].n,
        { timeout: 10_000 },
      )
      .toBe(1);
    expect(await auditRows(organizationId)).not.toContain(late);
  });
});

describe("the audit consumer", () => {
  /** The audit store on its own ORM, to deliver messages to it directly. */
  async function withAuditLog(
    work: (
      auditLog: AuditLog,
      orm: Awaited<ReturnType<typeof createOrganizationOrm>>,
    ) => Promise<void>,
  ) {
    const orm = await createOrganizationOrm(h.config.DATABASE_URL);
    try {
      const logger = createLogger("audit-test", "silent");
      await work(
        new AuditLog({
          tx: new Transactions(orm, { kick() {} }, h.cache, logger),
          logger,
          read: listReads(orm, undefined, 10_000),
        }),
        orm,
      );
    } finally {
      await orm.close();
    }
  }

  it("answers a total that agrees with its page when events are stored meanwhile", async () => {
    const owner = await h.user("Steady");
    const { organizationId } = await newOrganization(h, owner, "Steady");
    const databaseId = 10_000n * organizationId + 9n;
    const tableId = databaseId + 1n;
    let stored = 0;
    // Another writer stores an event that every scope and filter below matches before each
    // statement the list runs: however it reads, its total and page must come from one moment.
    const storeOne = () =>
      h.db.query(
        `insert into organization.audit_event (event_id, at, organization_id, database_id,
           table_id, actor_type, actor_id, action, target_type, target_id)
         values ($1, now(), $2, $3, $4, 'user', $5, 'record.created', 'record', $6)`,
        [crypto.randomUUID(), organizationId, databaseId, tableId, owner.id, ++stored],
      );
    const orm = await createOrganizationOrm(h.config.DATABASE_URL);
    try {
      const logger = createLogger("audit-test", "silent");
      const connection = orm.em.getConnection();
      const execute = connection.execute.bind(connection);
      connection.execute = (async (...args: Parameters<typeof execute>) => {
        if (String(args[0]).includes("audit_event")) await storeOne();
        return execute(...args);
      }) as typeof connection.execute;
      const listed = listReads(orm, undefined, 10_000);
      const read: ReadStatement = async (sql, params) => {
        await storeOne();
        return listed(sql, params);
      };
      const tx = new Transactions(orm, { kick() {} }, h.cache, logger);
      const auditLog = new AuditLog({ tx, logger, read });
      const call = {
        principal: { kind: "user", userId: owner.id, sessionId: "steady" } as const,
        requestId: "steady",
        userId: owner.id,
      };
      await storeOne();
      const scopes: AuditScope[] = [
        { case: "organizationId", value: organizationId },
        { case: "databaseId", value: databaseId },
        { case: "tableId", value: tableId },
      ];
      const filters = [
        { limit: 1000, offset: 0, action: "" },
        { limit: 1000, offset: 0, action: "record.created" },
        { limit: 1000, offset: 0, action: "", since: new Date(Date.now() - DAY_MS) },
        { limit: 1000, offset: 0, action: "", until: new Date(Date.now() + DAY_MS) },
      ];
      for (const scope of scopes) {
        for (const filter of filters) {
          const page = await auditLog.list(call, scope, filter);
          expect({ scope: scope.case, filter, total: page.total }).toEqual({
            scope: scope.case,
            filter,
            total: BigInt(page.entries.length),
          });
          expect(page.entries.length).toBeGreaterThan(0);
          // An offset past the end still counts them all.
          const beyond = await auditLog.list(call, scope, { ...filter, offset: 100_000 });
          expect(beyond.entries).toEqual([]);
          expect(beyond.total).toBeGreaterThanOrEqual(page.total);
        }
      }
    } finally {
      await orm.close();
    }
  });

  // Lists read on a pool whose connections carry the timeout; with one connection in all, in a
  // transaction that sets it on the ORM's (kit `listReads`).
  it.each([
    ["on the list pool", true],
    ["in the ORM's pool", false],
  ])(
    "gives up a list PostgreSQL takes longer than the list timeout over (%s)",
    async (_, onPool) => {
      const owner = await h.user(`Patient ${onPool}`);
      const { organizationId } = await newOrganization(h, owner, `Patient ${onPool}`);
      const scope = { case: "organizationId", value: organizationId } as const;
      // Its own events stored first: nothing of the service's is left to wait for the lock.
      await expect
        .poll(async () => (await list(h, owner, scope)).total, { timeout: 10_000 })
        .toBe(2n);
      const orm = await createOrganizationOrm(h.config.DATABASE_URL);
      const logger = createLogger("audit-test", "silent");
      const pool = onPool
        ? openReadPool({
            url: h.config.DATABASE_URL,
            schema: "organization",
            max: 1,
            statementTimeoutMs: 200,
            logger,
          })
        : undefined;
      const blocker = await h.db.connect();
      try {
        const auditLog = new AuditLog({
          tx: new Transactions(orm, { kick() {} }, h.cache, logger),
          logger,
          read: listReads(orm, pool, 200),
        });
        const call = {
          principal: { kind: "user", userId: owner.id, sessionId: "patient" } as const,
          requestId: "patient",
          userId: owner.id,
        };
        const before = await auditLog.list(call, scope, { limit: 50, offset: 0, action: "" });
        expect(before.total).toBe(2n);
        // The log locked whole: the list's statement waits, as a slow one would work.
        await blocker.query("begin");
        await blocker.query("lock table organization.audit_event in access exclusive mode");
        const failure = await auditLog.list(call, scope, { limit: 50, offset: 0, action: "" }).then(
          () => undefined,
          (error: unknown) => error,
        );
        // Cancelled (57014), which kit's server answers as DeadlineExceeded, the gateway's 503.
        expect(isCancelledStatement(failure)).toBe(true);
        // PostgreSQL no longer works on it: nothing waits for the lock.
        const { rows } = await h.db.query(
          `select count(*)::int as n from pg_locks
         where not granted and relation = 'organization.audit_event'::regclass`,
        );
        expect(rows[0].n).toBe(0);
      } finally {
        await blocker.query("rollback");
        blocker.release();
        await orm.close();
        await pool?.end();
      }
    },
  );

  it("stores an event once however often it is delivered, also when deliveries race", async () => {
    const owner = await h.user("Racing");
    const { organizationId } = await newOrganization(h, owner, "Racing");
    await withAuditLog(async (auditLog, orm) => {
      const eventId = `racing-${organizationId}`;
      const event = create(AuditEventSchema, {
        meta: create(EventMetaSchema, { eventId, occurredAt: timestampFromDate(new Date()) }),
        organizationId,
        action: "organization.updated",
        target: create(AuditEvent_TargetSchema, { type: "organization", id: organizationId }),
      });
      const message = {
        subject: SUBJECTS.audit("organization.updated"),
        data: toBinary(AuditEventSchema, event),
        id: eventId,
        deliveryCount: 1,
      };
      const stored = await Promise.all(
        [1, 2, 3].map(() => auditLog.apply(orm.em.fork(), DURABLES.audit, [message])),
      );
      expect(stored).toEqual([1, 1, 1]);
      await auditLog.apply(orm.em.fork(), DURABLES.audit, [{ ...message, deliveryCount: 2 }]);
      const { rows } = await h.db.query(
        "select count(*)::int as n from organization.audit_event where event_id = $1",
        [eventId],
      );
      expect(rows[0].n).toBe(1);
    });
  });

  it("stores every event of an audit.batch message of events (as earlier releases sent them) once, as if each had come alone", async () => {
    const owner = await h.user("Batcher");
    const { organizationId } = await newOrganization(h, owner, "Batcher");
    const record = (id: bigint, at?: Date) =>
      auditEventOf({
        organizationId,
        databaseId: 5n,
        tableId: 6n,
        action: "record.created",
        target: { type: "record", id },
        actor: owner,
        changes: [{ key: "1", label: "Name", new: `row ${id}` }],
        ...(at ? { at } : {}),
      });
    const events = [record(1n), record(2n, new Date(Date.now() - 91 * DAY_MS)), record(3n)];
    const message = {
      subject: SUBJECTS.auditBatch,
      payload: toBinary(
        AuditEventBatchSchema,
        create(AuditEventBatchSchema, { events: events.map((e) => e.event) }),
      ),
      eventId: crypto.randomUUID(),
    };
    await h.bus.publish(message!.subject, message!.payload, message!.eventId);

    const created = async () =>
      (await list(h, owner, byOrganization(organizationId), { action: "record.created" })).events;
    await expect.poll(async () => (await created()).length, { timeout: 10_000 }).toBe(2);
    expect(
      (await created())
        .sort((a, b) => Number(a.target!.id - b.target!.id))
        .map((e) => ({
          eventId: e.eventId,
          action: e.action,
          target: e.target?.id,
          database: e.databaseId,
          actor: e.actor?.id,
          changes: e.changes.map((c) => [c.key, c.label, c.newValue?.kind.value]),
        })),
    ).toEqual(
      [events[0]!, events[2]!].map((e, i) => ({
        eventId: e.eventId,
        action: "record.created",
        target: i === 0 ? 1n : 3n,
        database: 5n,
        actor: owner.id,
        changes: [["1", "Name", i === 0 ? "row 1" : "row 3"]],
      })),
    );

    // A redelivery stores nothing more.
    await withAuditLog(async (auditLog, orm) => {
      const again = {
        subject: message!.subject,
        data: message!.payload,
        id: message!.eventId,
        deliveryCount: 2,
      };
      expect(await auditLog.apply(orm.em.fork(), DURABLES.audit, [again])).toBe(2);
    });
    const { rows } = await h.db.query(
      "select count(*)::int as n from organization.audit_event where organization_id = $1 and action = 'record.created'",
      [organizationId],
    );
    expect(rows[0].n).toBe(2);
  });

  it("stores every event of a compact audit.batch once, its ids made from the message's", async () => {
    const owner = await h.user("Compact");
    const { organizationId } = await newOrganization(h, owner, "Compact");
    // Row 9's changes hold text that JSON escapes, row 8 has none, and row 11 was written with
    // field 1 named otherwise (its label its own, the others' shared by the message).
    const items = [
      { targetId: 7n, changes: [{ key: "1", label: "Name", new: "row 7" }] },
      { targetId: 8n, changes: [] },
      { targetId: 9n, changes: [{ key: "1", label: "Name", new: 'say "hi"\n' }] },
      { targetId: 11n, changes: [{ key: "1", label: "Title", new: "row 11" }] },
    ];
    const [message, ...more] = compactAuditEvents(
      {
        organizationId,
        databaseId: 5n,
        tableId: 6n,
        action: "record.created",
        target: create(AuditEvent_TargetSchema, { type: "record" }),
      },
      items,
      { principal: { kind: "user", userId: owner.id, sessionId: "s" }, requestId: "req-1" },
    );
    expect(more).toEqual([]);
    expect(message!.subject).toBe(SUBJECTS.auditBatch);
    // A lone event, delivered with it: an ordinary event on its own subject.
    const [lone] = compactAuditEvents(
      {
        organizationId,
        databaseId: 5n,
        tableId: 6n,
        action: "record.created",
        target: create(AuditEvent_TargetSchema, { type: "record" }),
      },
      [{ targetId: 10n, changes: [] }],
      { principal: { kind: "user", userId: owner.id, sessionId: "s" }, requestId: "req-1" },
    );
    expect(lone!.subject).toBe(SUBJECTS.audit("record.created"));
    await withAuditLog(async (auditLog, orm) => {
      const delivered = {
        subject: message!.subject,
        data: message!.payload,
        id: message!.eventId,
        deliveryCount: 1,
      };
      const loneDelivered = {
        subject: lone!.subject,
        data: lone!.payload,
        id: lone!.eventId,
        deliveryCount: 1,
      };
      expect(await auditLog.apply(orm.em.fork(), DURABLES.audit, [delivered, loneDelivered])).toBe(
        5,
      );
      // A redelivery stores nothing more.
      await auditLog.apply(orm.em.fork(), DURABLES.audit, [{ ...delivered, deliveryCount: 2 }]);
    });
    const listed = async () =>
      (await list(h, owner, byOrganization(organizationId), { action: "record.created" })).events
        .sort((a, b) => Number(a.target!.id - b.target!.id))
        .map((e) => ({
          eventId: e.eventId,
          action: e.action,
          target: [e.target?.type, e.target?.id],
          scope: [e.databaseId, e.tableId],
          actor: e.actor?.id,
          changes: e.changes.map((c) => [c.key, c.label, c.newValue?.kind.value]),
        }));
    const stored = await listed();
    expect(stored).toEqual(
      [
        [7n, [["1", "Name", "row 7"]]],
        [8n, []],
        [9n, [["1", "Name", 'say "hi"\n']]],
        [10n, []],
        [11n, [["1", "Title", "row 11"]]],
      ].map(([id, changes], i) => ({
        eventId: i === 3 ? lone!.eventId : compactAuditEventId(message!.eventId, i < 3 ? i : 3),
        action: "record.created",
        target: ["record", id],
        scope: [5n, 6n],
        actor: owner.id,
        changes,
      })),
    );
    const { rows } = await h.db.query(
      "select count(*)::int as n, sum(events)::int as events, count(distinct request_id)::int as requests from organization.audit_event where organization_id = $1 and action = 'record.created'",
      [organizationId],
    );
    // The compact message's events in one row, the lone one in its own.
    expect(rows[0]).toEqual({ n: 2, events: 5, requests: 1 });
    // The group's label is stored once, not with each change.
    // Its changes are kept as the producer wrote them (json), not in the `jsonb` column.
    const { rows: groups } = await h.db.query(
      "select labels, changes, group_changes from organization.audit_event where organization_id = $1 and events > 1",
      [organizationId],
    );
    expect(groups).toEqual([
      {
        labels: { "1": "Name" },
        changes: [],
        group_changes: [
          [{ key: "1", new: "row 7" }],
          [],
          [{ key: "1", new: 'say "hi"\n' }],
          [{ key: "1", label: "Title", new: "row 11" }],
        ],
      },
    ]);
    // A group stored before `group_changes` (its changes in `changes`) lists the same.
    const moved = await h.db.query(
      `update organization.audit_event set changes = group_changes::jsonb, group_changes = null
       where organization_id = $1 and events > 1`,
      [organizationId],
    );
    expect(moved.rowCount).toBe(1);
    expect(await listed()).toEqual(stored);
  });

  it("lists a stored group's events one by one: every offset, limit, total and action filter as if each were a row", async () => {
    const owner = await h.user("Grouped");
    const { organizationId } = await newOrganization(h, owner, "Grouped");
    const base = Date.now() - 60_000;
    const lone = (id: bigint, seconds: number, action = "record.updated") =>
      auditEventOf({
        organizationId,
        databaseId: 5n,
        tableId: 6n,
        action,
        target: { type: "record", id },
        actor: owner,
        at: new Date(base + seconds * 1000),
      });
    const group = (ids: bigint[], seconds: number) => {
      const eventId = crypto.randomUUID();
      const batch = create(AuditEventBatchSchema, {
        common: {
          meta: {
            eventId,
            occurredAt: timestampFromDate(new Date(base + seconds * 1000)),
            actor: { type: Actor_Type.USER, id: owner.id },
            requestId: "test",
          },
          organizationId,
          databaseId: 5n,
          tableId: 6n,
          action: "record.created",
          target: { type: "record" },
        },
        targetIds: ids,
        changesJson: JSON.stringify(ids.map((id) => [{ key: "1", label: "N", new: `v${id}` }])),
      });
      return { eventId, payload: toBinary(AuditEventBatchSchema, batch), ids };
    };
    const first = lone(1n, 1);
    const big = group([11n, 12n, 13n, 14n, 15n], 2);
    const middle = lone(2n, 3);
    const small = group([21n, 22n], 4);
    const last = lone(3n, 5);
    await withAuditLog(async (auditLog, orm) => {
      const message = (m: { eventId: string; payload: Uint8Array }, subject: string) => ({
        subject,
        data: m.payload,
        id: m.eventId,
        deliveryCount: 1,
      });
      const updated = SUBJECTS.audit("record.updated");
      expect(
        await auditLog.apply(orm.em.fork(), DURABLES.audit, [
          message(first, updated),
          message(big, SUBJECTS.auditBatch),
          message(middle, updated),
          message(small, SUBJECTS.auditBatch),
          message(last, updated),
        ]),
      ).toBe(10);
    });
    // Newest first; a group's events in the order written.
    const all = [
      [last.eventId, 3n],
      ...small.ids.map((id, i) => [compactAuditEventId(small.eventId, i), id]),
      [middle.eventId, 2n],
      ...big.ids.map((id, i) => [compactAuditEventId(big.eventId, i), id]),
      [first.eventId, 1n],
    ];
    const scope = byOrganization(organizationId);
    // The range holds these events only (not the organization's own, made just now).
    const since = timestampFromDate(new Date(base));
    const until = timestampFromDate(new Date(base + 10_000));
    const page = async (offset: number, limit: number, action = "") => {
      const listed = await list(h, owner, scope, { offset, limit, since, until, action });
      return {
        total: listed.total,
        events: listed.events.map((e) => [e.eventId, e.target!.id]),
        changes: listed.events.map((e) => e.changes.map((c) => c.newValue?.kind.value)),
      };
    };
    expect((await page(0, 50)).events).toEqual(all);
    for (const limit of [1, 2, 3, 4]) {
      for (let offset = 0; offset <= all.length; offset++) {
        const { total, events } = await page(offset, limit);
        expect(total).toBe(10n);
        expect(events).toEqual(all.slice(offset, offset + limit));
      }
    }
    const created = await page(1, 4, "record.created");
    expect(created.total).toBe(7n);
    expect(created.events).toEqual([all[2], all[4], all[5], all[6]]);
    expect(created.changes).toEqual([["v22"], ["v11"], ["v12"], ["v13"]]);
    // The kept counts add a group's events (the whole hours of a range come from them).
    const { rows } = await h.db.query(
      `select coalesce(sum(n), 0)::int as n from organization.audit_count
       where scope = 'table' and scope_id = 6 and organization_id = $1 and action = 'record.created'`,
      [organizationId],
    );
    expect(rows[0].n).toBe(7);
  });

  it("stores several messages in one statement, skipping those already stored, all or nothing", async () => {
    const owner = await h.user("Several");
    const { organizationId } = await newOrganization(h, owner, "Several");
    const messageOf = (name: string, changes: AuditChange[] | string) => {
      const { eventId, event } = auditEventOf({
        organizationId,
        action: "organization.updated",
        target: { type: "organization", id: organizationId },
        actor: owner,
      });
      event.changesJson = typeof changes === "string" ? changes : auditChangesJson(changes);
      return {
        subject: SUBJECTS.audit("organization.updated"),
        data: toBinary(AuditEventSchema, event),
        id: eventId,
        deliveryCount: 1,
        name,
      };
    };
    const storedNames = async () =>
      (
        await h.db.query(
          `select changes->0->>'new' as name from organization.audit_event
           where organization_id = $1 and action = 'organization.updated' order by at, event_id`,
          [organizationId],
        )
      ).rows
        .map((row) => row.name)
        .sort();
    const first = messageOf("first", [{ key: "name", new: "first" }]);
    const second = messageOf("second", [{ key: "name", new: "second" }]);
    // A value that would close the row's JSON early stays a value: the changes are a string.
    const third = messageOf("third", [{ key: "name", new: 'third"},{"event_id":"x' }]);
    const broken = messageOf("broken", "[{");

    await withAuditLog(async (auditLog, orm) => {
      expect(await auditLog.apply(orm.em.fork(), DURABLES.audit, [first])).toBe(1);
      // The batch with a message whose changes are not JSON fails whole: nothing of it is kept.
      await expect(
        auditLog.apply(orm.em.fork(), DURABLES.audit, [second, broken]),
      ).rejects.toThrow();
      expect(await storedNames()).toEqual(["first"]);
      const pending = await h.db.query(
        "select count(*)::int as n from organization.processed_event where event_id = any($1)",
        [[second.id, broken.id]],
      );
      expect(pending.rows[0].n).toBe(0);

      // first again (already stored), second and third: only the two new ones are added.
      await auditLog.apply(orm.em.fork(), DURABLES.audit, [first, second, third, second]);
      expect(await storedNames()).toEqual(["first", "second", 'third"},{"event_id":"x']);
    });
  });
});
