import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createLogger, SUBJECTS } from "@rowbase/kit";
import { EventMetaSchema } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import {
  ApiCallsCountedSchema,
  TransferCountedSchema,
} from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import { Role, TokenAccess } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Transactions } from "../src/change-set.js";
import { DURABLES } from "../src/event-consumers.js";
import { createOrganizationOrm } from "../src/service.js";
import { UsageStats } from "../src/usage-stats.js";
import {
  as,
  type Harness,
  newOrganization,
  reasonOf,
  SERVICE,
  startHarness,
  type TestUser,
  validationOf,
} from "./harness.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

/** Publishes what the gateway counts; returns the event id. */
async function usage(
  organizationId: bigint,
  at: Date,
  counted: { tokenId?: bigint; apiCalls?: bigint; transferBytes?: bigint },
  eventId: string = crypto.randomUUID(),
): Promise<string> {
  const meta = create(EventMetaSchema, { eventId, occurredAt: timestampFromDate(at) });
  if (counted.transferBytes !== undefined) {
    const event = create(TransferCountedSchema, {
      meta,
      organizationId,
      tokenId: counted.tokenId ?? 0n,
      transferBytes: counted.transferBytes,
    });
    await h.bus.publish(SUBJECTS.transferCounted, toBinary(TransferCountedSchema, event), eventId);
  } else {
    const event = create(ApiCallsCountedSchema, {
      meta,
      organizationId,
      tokenId: counted.tokenId ?? 0n,
      apiCalls: counted.apiCalls ?? 1n,
    });
    await h.bus.publish(SUBJECTS.apiCallsCounted, toBinary(ApiCallsCountedSchema, event), eventId);
  }
  return eventId;
}

/** Waits until the usage consumer applied the event. */
async function applied(eventId: string) {
  await expect
    .poll(
      async () =>
        (
          await h.db.query(
            `select count(*)::int as n from organization.processed_event
             where consumer = 'organization_usage' and event_id = $1`,
            [eventId],
          )
        ).rows[0].n,
      { timeout: 10_000 },
    )
    .toBe(1);
}

async function tokenOf(owner: TestUser, organizationId: bigint, name: string) {
  const { apiToken } = await h.org.createApiToken(
    { organizationId, name, access: TokenAccess.READ_WRITE },
    await as(owner),
  );
  return apiToken!.tokenId;
}

const utcDay = (at: Date) => at.toISOString().slice(0, 10);

describe("GetApiStats", () => {
  it("adds up calls and transfer per UTC day and per token, every day listed", async () => {
    const owner = await h.user("Counter");
    const viewer = await h.user("Reader");
    const { organizationId } = await newOrganization(h, owner, "Counted");
    const { invite } = await h.org.createInvite(
      { organizationId, email: viewer.email, role: Role.VIEWER },
      await as(owner),
    );
    await h.org.acceptInvite({ inviteId: invite!.inviteId }, await as(viewer));
    const alpha = await tokenOf(owner, organizationId, "Alpha");
    const beta = await tokenOf(owner, organizationId, "Beta");

    const day1Late = new Date("2026-03-10T23:59:59.999Z");
    const day2Early = new Date("2026-03-11T00:00:00.000Z");
    const ids = [
      await usage(organizationId, day1Late, { tokenId: alpha, apiCalls: 2n }),
      await usage(organizationId, day1Late, { apiCalls: 1n }),
      await usage(organizationId, day1Late, { transferBytes: 1000n }),
      await usage(organizationId, day2Early, { tokenId: alpha, apiCalls: 1n }),
      await usage(organizationId, day2Early, { tokenId: beta, apiCalls: 4n }),
      await usage(organizationId, day2Early, { tokenId: beta, transferBytes: 500n }),
      // Outside the period asked for.
      await usage(organizationId, new Date("2026-03-13T08:00:00.000Z"), {
        tokenId: beta,
        apiCalls: 50n,
      }),
      await usage(organizationId, new Date("2026-03-09T23:59:59.000Z"), {
        tokenId: alpha,
        apiCalls: 70n,
      }),
    ];
    // The same event delivered again (a republish) is counted once.
    await usage(organizationId, day2Early, { tokenId: beta, apiCalls: 4n }, ids[4]);
    for (const id of ids) await applied(id);

    const { stats } = await h.org.getApiStats(
      { organizationId, fromDate: "2026-03-10", toDate: "2026-03-12" },
      await as(viewer),
    );
    expect(stats).toMatchObject({
      fromDate: "2026-03-10",
      toDate: "2026-03-12",
      apiCalls: 8n,
      transferBytes: 1500n,
    });
    expect(stats!.days.map((d) => [d.date, d.apiCalls, d.transferBytes])).toEqual([
      ["2026-03-10", 3n, 1000n],
      ["2026-03-11", 5n, 500n],
      ["2026-03-12", 0n, 0n],
    ]);
    // Session calls (token 0) count in the totals but are not a token.
    expect(stats!.tokens.map((t) => [t.tokenId, t.name, t.apiCalls])).toEqual([
      [beta, "Beta", 4n],
      [alpha, "Alpha", 3n],
    ]);

    const one = await h.org.getApiStats(
      { organizationId, fromDate: "2026-03-13", toDate: "2026-03-13" },
      await as(owner),
    );
    expect(one.stats!.tokens.map((t) => [t.name, t.apiCalls])).toEqual([["Beta", 50n]]);
    // The revoked token keeps its name in the statistics.
    await h.org.revokeApiToken({ organizationId, tokenId: beta }, await as(owner));
    const after = await h.org.getApiStats(
      { organizationId, fromDate: "2026-03-13", toDate: "2026-03-13" },
      await as(owner),
    );
    expect(after.stats!.tokens.map((t) => t.name)).toEqual(["Beta"]);
  });

  it("defaults to the first of this month through today", async () => {
    const owner = await h.user("Monthly");
    const { organizationId } = await newOrganization(h, owner, "Monthly");
    const now = new Date();
    const firstOfMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const lastMonth = new Date(firstOfMonth.getTime() - 1);
    const ids = [
      await usage(organizationId, now, { apiCalls: 2n }),
      await usage(organizationId, firstOfMonth, { apiCalls: 1n }),
      await usage(organizationId, firstOfMonth, { transferBytes: 42n }),
      await usage(organizationId, lastMonth, { apiCalls: 100n }),
    ];
    for (const id of ids) await applied(id);

    const { stats } = await h.org.getApiStats({ organizationId }, await as(owner));
    expect(stats).toMatchObject({
      fromDate: utcDay(firstOfMonth),
      toDate: utcDay(now),
      apiCalls: 3n,
      transferBytes: 42n,
    });
    expect(stats!.days).toHaveLength(now.getUTCDate());
    expect(stats!.days[0]!.date).toBe(utcDay(firstOfMonth));
    expect(stats!.days.at(-1)!.date).toBe(utcDay(now));

    // The same numbers feed GetLimits and GetMonthlyUsage.
    const limits = await h.org.getLimits({ organizationId }, await as(owner));
    expect(limits.usage).toMatchObject({ apiCallsThisMonth: 3n, transferBytesThisMonth: 42n });
    expect(await h.org.getMonthlyUsage({ organizationId }, await as(SERVICE))).toMatchObject({
      apiCallsThisMonth: 3n,
      transferBytesThisMonth: 42n,
    });
  });

  it("answers totals and tokens from one moment when calls are counted meanwhile", async () => {
    const owner = await h.user("Snapshot");
    const { organizationId } = await newOrganization(h, owner, "Snapshot");
    const token = await tokenOf(owner, organizationId, "Busy");
    const day = utcDay(new Date());
    // One call of the token counted as the usage consumer counts it (both sums in one
    // statement), before every statement that reads the sums.
    const countOne = () =>
      h.db.query(
        `with daily as (
           insert into organization.usage_daily (organization_id, day, api_calls, transfer_bytes)
           values ($1, $2::date, 1, 0) on conflict (organization_id, day)
           do update set api_calls = organization.usage_daily.api_calls + 1
         )
         insert into organization.usage_daily_token
           (organization_id, day, token_id, api_calls, transfer_bytes)
         values ($1, $2::date, $3, 1, 0) on conflict (organization_id, day, token_id)
         do update set api_calls = organization.usage_daily_token.api_calls + 1`,
        [organizationId, day, token],
      );
    await countOne();
    const orm = await createOrganizationOrm(h.config.DATABASE_URL);
    try {
      const connection = orm.em.getConnection();
      const execute = connection.execute.bind(connection);
      connection.execute = (async (...args: Parameters<typeof execute>) => {
        if (String(args[0]).includes("usage_daily")) await countOne();
        return execute(...args);
      }) as typeof connection.execute;
      const logger = createLogger("stats-test", "silent");
      const stats = new UsageStats({
        tx: new Transactions(orm, { kick() {} }, h.cache, logger),
        logger,
      });
      const call = {
        principal: { kind: "user", userId: owner.id, sessionId: "snapshot" } as const,
        requestId: "snapshot",
        userId: owner.id,
      };
      const seen = await stats.stats(call, organizationId, day, day);
      // Every call was the token's: the token's count is the total, whatever came in meanwhile.
      expect(seen.tokens.map((t) => [t.tokenId, t.apiCalls])).toEqual([[token, seen.apiCalls]]);
      expect(seen.apiCalls).toBeGreaterThan(0n);
    } finally {
      await orm.close();
    }
  });

  it("answers members only and validates the period", async () => {
    const owner = await h.user("Private");
    const outsider = await h.user("Nosy");
    const { organizationId } = await newOrganization(h, owner, "Private");
    expect(await reasonOf(h.org.getApiStats({ organizationId }, await as(outsider)))).toBe(
      "organization_not_found",
    );
    expect(
      await validationOf(
        h.org.getApiStats({ organizationId, fromDate: "2026-02-30" }, await as(owner)),
      ),
    ).toEqual([
      { key: "from", message: "must be a date YYYY-MM-DD", source: "query", code: "invalid_value" },
    ]);
    expect(
      await validationOf(
        h.org.getApiStats(
          { organizationId, fromDate: "2026-03-02", toDate: "2026-03-01" },
          await as(owner),
        ),
      ),
    ).toMatchObject([{ key: "from", message: "must not be after to" }]);
  });
});

describe("GetMonthlyUsage", () => {
  it("answers services only, and not found for an unknown organization", async () => {
    const owner = await h.user("Internal");
    const { organizationId } = await newOrganization(h, owner, "Internal");
    expect(await h.org.getMonthlyUsage({ organizationId }, await as(SERVICE))).toMatchObject({
      apiCallsThisMonth: 0n,
      transferBytesThisMonth: 0n,
    });
    expect(await reasonOf(h.org.getMonthlyUsage({ organizationId }, await as(owner)))).toBe(
      "internal_only",
    );
    expect(
      await reasonOf(h.org.getMonthlyUsage({ organizationId: 999_999_999n }, await as(SERVICE))),
    ).toBe("organization_not_found");
  });
});

describe("usage consumer", () => {
  /** The usage consumer's handler on an ORM of its own. */
  function usageStats(orm: Awaited<ReturnType<typeof createOrganizationOrm>>): UsageStats {
    const logger = createLogger("usage-test", "silent");
    return new UsageStats({ tx: new Transactions(orm, { kick() {} }, h.cache, logger), logger });
  }

  /** A delivery of `apiCalls` calls of token 7, with an id of its own per organization. */
  function apiCallsCounted(organizationId: bigint, name: string, apiCalls: bigint) {
    const event = create(ApiCallsCountedSchema, {
      meta: create(EventMetaSchema, {
        eventId: `${name}-1`,
        occurredAt: timestampFromDate(new Date()),
      }),
      organizationId,
      tokenId: 7n,
      apiCalls,
    });
    return {
      subject: SUBJECTS.apiCallsCounted,
      data: toBinary(ApiCallsCountedSchema, event),
      id: `${name}-${organizationId}`,
      deliveryCount: 1,
    };
  }

  it("adds an event once however often it is delivered, also when deliveries race", async () => {
    const owner = await h.user("Twice");
    const { organizationId } = await newOrganization(h, owner, "Twice");
    const orm = await createOrganizationOrm(h.config.DATABASE_URL);
    try {
      const stats = usageStats(orm);
      const message = apiCallsCounted(organizationId, "twice", 3n);
      await Promise.all([1, 2, 3].map(() => stats.apply(orm.em.fork(), DURABLES.usage, message)));
      await stats.apply(orm.em.fork(), DURABLES.usage, { ...message, deliveryCount: 2 });
      const { rows } = await h.db.query(
        `select (select sum(api_calls)::int from organization.usage_daily where organization_id = $1) as daily,
                (select sum(api_calls)::int from organization.usage_daily_token
                  where organization_id = $1 and token_id = 7) as token`,
        [organizationId.toString()],
      );
      expect(rows[0]).toEqual({ daily: 3, token: 3 });
    } finally {
      await orm.close();
    }
  });

  it("drops the counts of an organization whose deletion commits while they are added", async () => {
    const owner = await h.user("Racing");
    const { organizationId } = await newOrganization(h, owner, "Racing");
    const orm = await createOrganizationOrm(h.config.DATABASE_URL);
    const deleter = await h.db.connect();
    try {
      const stats = usageStats(orm);
      const message = apiCallsCounted(organizationId, "racing", 2n);
      // The deletion has removed the row but not committed when the counts arrive: they wait
      // for it on the organization's row, and meet the deletion once it commits.
      await deleter.query("begin");
      await deleter.query("delete from organization.organizations where id = $1", [
        organizationId.toString(),
      ]);
      const applying = stats.apply(orm.em.fork(), DURABLES.usage, message);
      const outcome = applying.then(
        () => "applied",
        (error: unknown) => error,
      );
      await expect
        .poll(
          async () =>
            (
              await h.db.query(
                `select count(*)::int as n from pg_stat_activity
                 where pid <> pg_backend_pid() and wait_event_type = 'Lock'
                   and query like '%insert into usage_daily%'`,
              )
            ).rows[0].n,
          { timeout: 10_000 },
        )
        .toBe(1);
      await deleter.query("commit");
      expect(await outcome).toBe("applied");
      const { rows } = await h.db.query(
        `select (select count(*)::int from organization.usage_daily where organization_id = $1) as daily,
                (select count(*)::int from organization.usage_daily_token where organization_id = $1) as tokens,
                (select count(*)::int from organization.processed_event
                  where consumer = $2 and event_id = $3) as claimed`,
        [organizationId.toString(), DURABLES.usage, message.id],
      );
      expect(rows[0]).toEqual({ daily: 0, tokens: 0, claimed: 1 });
    } finally {
      await deleter.query("rollback").catch(() => {});
      deleter.release();
      await orm.close();
    }
  });

  it("drops counts of an organization that does not exist and keeps going", async () => {
    const owner = await h.user("After");
    const { organizationId } = await newOrganization(h, owner, "After");
    const ghost = await usage(999_999_998n, new Date(), { apiCalls: 5n });
    const real = await usage(organizationId, new Date(), { apiCalls: 1n });
    await applied(ghost);
    await applied(real);
    const { rows } = await h.db.query(
      "select count(*)::int as n from organization.usage_daily where organization_id = 999999998",
    );
    expect(rows[0].n).toBe(0);
    const { stats } = await h.org.getApiStats({ organizationId }, await as(owner));
    expect(stats!.apiCalls).toBe(1n);
  });
});
