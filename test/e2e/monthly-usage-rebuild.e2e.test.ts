import net from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import {
  ApiCallCounter,
  apiCallCounterKey,
  MonthlyUsageRebuild,
  organizationMonthlyUsage,
  rebuildClaimKey,
  type StoredMonthlyUsage,
  type StoredMonthlyUsageSource,
  TransferCounter,
  transferCounterKey,
} from "@rowbase/gateway";
import {
  type Cache,
  Code,
  ConnectError,
  createServiceClient,
  errorInfoOf,
  MemoryCache,
  RedisCache,
  SUBJECTS,
} from "@rowbase/kit";
import { testInfra, uniqueName } from "@rowbase/kit/testing";
import { EventMetaSchema } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import {
  ApiCallsCountedSchema,
  TransferCountedSchema,
} from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { createOrg, q } from "./support/organizations.js";

/**
 * The gateway's monthly counters rebuilt from the totals Postgres holds when the shared cache
 * lost them: the totals are the real organization service's GetMonthlyUsage over usage rows made
 * from real `usage.api_calls` and `usage.transfer` events on the bus, and the counters run on
 * real Redis, where losing a key is what the rebuild is for, and on the in-process cache of the
 * one-process mode. The counters' clock is fixed in the middle of a month (never in the minutes
 * after midnight when no rebuild happens), while the stored totals are those of the service's
 * own month.
 */

const MONTH = "2026-11";
const MIDMONTH = new Date("2026-11-15T12:00:00.000Z");
const EVENTUALLY = { timeout: 10_000, interval: 100 };

interface LogLine {
  service: string;
  msg: string;
  procedure?: string;
  request_id?: string;
}

const GET_MONTHLY_USAGE = "rowbase.organization.v1.OrganizationService/GetMonthlyUsage";
const lines: LogLine[] = [];
let sys: TestSystem;
let api: ReturnType<typeof client>;
/** The owner of the organization of the running test (one each: a user owns few). */
let owner: SignedUpUser;
/** GetMonthlyUsage of the running organization service, asked as the gateway asks it. */
let storedUsage: StoredMonthlyUsageSource;
/** The same asked at a loopback port nothing listens on. */
let unreachable: StoredMonthlyUsageSource;

async function closedPortUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

beforeAll(async () => {
  sys = await startTestSystem(
    {},
    { logs: { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) } },
  );
  api = client(sys.baseUrl);
  storedUsage = organizationMonthlyUsage(
    createServiceClient(OrganizationService, sys.system.grpcUrls.organization),
    sys.internalJwtSecret,
  );
  unreachable = organizationMonthlyUsage(
    createServiceClient(OrganizationService, await closedPortUrl()),
    sys.internalJwtSecret,
  );
});

afterAll(async () => {
  await sys?.stop();
});

/** A fresh organization of a new owner, with nothing stored yet. */
async function newOrganization(): Promise<bigint> {
  owner = await signUp(sys, api);
  return BigInt((await createOrg(api, owner)).organization_id);
}

/**
 * Publishes what the gateway counts for an organization, as the gateway does, and waits until
 * the organization service's monthly totals hold it.
 */
async function store(organizationId: bigint, counted: Partial<StoredMonthlyUsage>) {
  const before = await storedUsage(organizationId, undefined);
  const meta = () =>
    create(EventMetaSchema, { eventId: crypto.randomUUID(), occurredAt: timestampNow() });
  if (counted.apiCalls) {
    const event = create(ApiCallsCountedSchema, {
      meta: meta(),
      organizationId,
      apiCalls: counted.apiCalls,
    });
    await sys.system.bus.publish(
      SUBJECTS.apiCallsCounted,
      toBinary(ApiCallsCountedSchema, event),
      event.meta!.eventId,
    );
  }
  if (counted.transferBytes) {
    const event = create(TransferCountedSchema, {
      meta: meta(),
      organizationId,
      transferBytes: counted.transferBytes,
    });
    await sys.system.bus.publish(
      SUBJECTS.transferCounted,
      toBinary(TransferCountedSchema, event),
      event.meta!.eventId,
    );
  }
  await expect
    .poll(() => storedUsage(organizationId, undefined), EVENTUALLY)
    .toEqual({
      apiCalls: before.apiCalls + (counted.apiCalls ?? 0n),
      transferBytes: before.transferBytes + (counted.transferBytes ?? 0n),
    });
}

/**
 * The real GetMonthlyUsage, with a note of every time the rebuild asks it; `gate` holds the
 * asks until released (to let callers pile up behind a rebuild), and `reachable = false` sends
 * them to the closed port instead.
 */
class AskedUsage {
  asked: { organizationId: bigint; requestId: string | undefined }[] = [];
  gate: Promise<void> | undefined;
  reachable = true;

  readonly source: StoredMonthlyUsageSource = async (organizationId, requestId) => {
    this.asked.push({ organizationId, requestId });
    await this.gate;
    return (this.reachable ? storedUsage : unreachable)(organizationId, requestId);
  };
}

describe.each([
  [
    "redis",
    async (): Promise<Cache> =>
      RedisCache.connect((await testInfra()).redisUrl, `${uniqueName("gw_rebuild")}:`),
  ],
  ["memory", async (): Promise<Cache> => new MemoryCache()],
])("rebuilding monthly counters on the %s store", (kind, makeCache) => {
  let cache: Cache;
  let stored: AskedUsage;
  let now: Date;
  let calls: ApiCallCounter;
  let transfer: TransferCounter;
  let organization: bigint;

  beforeAll(async () => {
    cache = await makeCache();
  });

  afterAll(async () => {
    if (cache instanceof RedisCache) {
      const keys = await cache.client.keys(`${cache.keyPrefix}*`);
      if (keys.length > 0) await cache.client.del(...keys);
    }
    await cache?.close();
  });

  beforeEach(async () => {
    organization = await newOrganization();
    now = MIDMONTH;
    stored = new AskedUsage();
    const rebuild = new MonthlyUsageRebuild(cache, stored.source);
    calls = new ApiCallCounter(cache, () => now, rebuild);
    transfer = new TransferCounter(cache, () => now, rebuild);
  });

  it("adds the stored calls to a counter the cache lost, once, and counts on from there", async () => {
    await store(organization, { apiCalls: 41n, transferBytes: 9_000n });
    const requestId = `req-1-${kind}`;
    expect(await calls.count(organization, 1000n, requestId)).toEqual({
      admitted: true,
      count: 42,
    });
    expect(stored.asked).toEqual([{ organizationId: organization, requestId }]);
    // The request id reached the organization service with the call.
    expect(
      lines.find(
        (l) =>
          l.service === "organization" &&
          l.procedure === GET_MONTHLY_USAGE &&
          l.request_id === requestId,
      ),
    ).toMatchObject({ msg: "rpc" });
    expect(await calls.count(organization, 1000n)).toEqual({ admitted: true, count: 43 });
    expect(stored.asked).toHaveLength(1);
    // The claim was given back: nothing stays behind but the counter.
    expect(await cache.get(rebuildClaimKey("api-calls", organization, MONTH))).toBeNull();

    // Lost again (the events of the 43 calls have been stored meanwhile): stored + 1.
    await cache.del(apiCallCounterKey(organization, MONTH));
    await store(organization, { apiCalls: 2n });
    expect(await calls.count(organization, 1000n)).toEqual({ admitted: true, count: 44 });
    expect(await calls.used(organization)).toBe(44);
    expect(stored.asked).toHaveLength(2);
    // The transfer counter is rebuilt by its own first reservation, with the stored bytes.
    expect(await cache.get(transferCounterKey(organization, MONTH))).toBeNull();
  });

  it("checks the allowance against the rebuilt count: a spent month stays spent", async () => {
    await store(organization, { apiCalls: 20n });
    const retryAfterSeconds = 15 * 24 * 3600 + 12 * 3600;
    expect(await calls.count(organization, 20n)).toEqual({ admitted: false, retryAfterSeconds });
    expect(await calls.count(organization, 20n)).toEqual({ admitted: false, retryAfterSeconds });
    expect(await calls.used(organization)).toBe(20);
    expect(stored.asked).toHaveLength(1);
    expect(await calls.count(organization, 21n)).toEqual({ admitted: true, count: 21 });
  });

  it("lets one caller rebuild while parallel calls count on, and loses none of them", async () => {
    await store(organization, { apiCalls: 100n });
    let release = () => {};
    stored.gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const pending = Array.from({ length: 16 }, () => calls.count(organization, 10_000n));
    await expect.poll(() => stored.asked.length).toBe(1);
    release();
    const results = await Promise.all(pending);
    expect(results.every((result) => result.admitted)).toBe(true);
    expect(stored.asked).toHaveLength(1);
    expect(await calls.used(organization)).toBe(116);
    expect(Math.max(...results.map((r) => (r.admitted ? r.count : 0)))).toBe(116);
  });

  it("answers Unavailable when the totals cannot be read, counts nothing, and retries", async () => {
    await store(organization, { apiCalls: 7n });
    stored.reachable = false;
    const error = await calls.count(organization, 100n).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unavailable);
    // The cause is the failed call itself.
    const cause = (error as ConnectError).cause;
    expect(cause).toBeInstanceOf(ConnectError);
    expect((cause as ConnectError).code).toBe(Code.Unavailable);
    expect(await calls.used(organization)).toBe(0);
    expect(await cache.get(rebuildClaimKey("api-calls", organization, MONTH))).toBeNull();

    stored.reachable = true;
    expect(await calls.count(organization, 100n)).toEqual({ admitted: true, count: 8 });
    expect(stored.asked).toHaveLength(2);
  });

  it("treats an organization that is gone as having nothing stored", async () => {
    await store(organization, { apiCalls: 9n });
    const deleted = await api("POST", "/organization/delete", {
      token: owner.token,
      query: q({ organization_id: Number(organization) }),
    });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    await expect
      .poll(
        () =>
          storedUsage(organization, undefined).then(
            () => undefined,
            (e: unknown) => errorInfoOf(e)?.reason,
          ),
        EVENTUALLY,
      )
      .toBe("organization_not_found");
    expect(await calls.count(organization, 100n)).toEqual({ admitted: true, count: 1 });
    expect(stored.asked).toHaveLength(1);
  });

  it("admits none of the calls that arrive while a spent month's counter is rebuilt", async () => {
    await store(organization, { apiCalls: 100n });
    let release = () => {};
    stored.gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const pending = Array.from({ length: 16 }, () => calls.count(organization, 100n));
    await expect.poll(() => stored.asked.length).toBe(1);
    // The calls after the first wait for its rebuild instead of counting in an empty counter.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await calls.used(organization)).toBe(0);
    release();
    const results = await Promise.all(pending);
    expect(results.filter((result) => result.admitted)).toEqual([]);
    expect(stored.asked).toHaveLength(1);
    expect(await calls.used(organization)).toBe(100);
  });

  it("leaves a claimed rebuild to its holder, and waits for it", async () => {
    await store(organization, { apiCalls: 5n });
    const claim = rebuildClaimKey("api-calls", organization, MONTH);
    await cache.setIfAbsent(claim, "1", 30);
    const waiting = calls.count(organization, 100n);
    await new Promise((resolve) => setTimeout(resolve, 100));
    // The holder makes the counter and gives the claim back.
    await cache.setIfAbsent(apiCallCounterKey(organization, MONTH), "5", 3600);
    await cache.del(claim);
    expect(await waiting).toEqual({ admitted: true, count: 6 });
    expect(stored.asked).toEqual([]);
  });

  it("rebuilds itself when a claim is gone without a counter (its holder failed)", async () => {
    await store(organization, { apiCalls: 5n });
    const claim = rebuildClaimKey("api-calls", organization, MONTH);
    await cache.setIfAbsent(claim, "1", 30);
    const waiting = calls.count(organization, 100n);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await cache.del(claim);
    expect(await waiting).toEqual({ admitted: true, count: 6 });
    expect(stored.asked).toHaveLength(1);
  });

  it("does not rebuild in the first minutes of a month, when clocks may disagree on it", async () => {
    await store(organization, { apiCalls: 3_000n });
    now = new Date("2026-12-01T00:01:00.000Z");
    expect(await calls.count(organization, 3_000n)).toEqual({ admitted: true, count: 1 });
    expect(stored.asked).toEqual([]);
    now = new Date("2026-12-01T00:02:00.000Z");
    await cache.del(apiCallCounterKey(organization, "2026-12"));
    expect(await calls.count(organization, 3_000n)).toEqual({
      admitted: false,
      retryAfterSeconds: expect.any(Number),
    });
    expect(stored.asked).toHaveLength(1);
  });

  it("rebuilds the transfer counter with the stored bytes before admitting a reservation", async () => {
    await store(organization, { apiCalls: 2n, transferBytes: 5_000n });
    const key = transferCounterKey(organization, MONTH);
    const requestId = `req-t-${kind}`;
    expect(await transfer.reserve(organization, 100, 6_000n, requestId)).toBe(key);
    expect(await transfer.used(organization)).toBe(5_100);
    expect(stored.asked).toEqual([{ organizationId: organization, requestId }]);
    // The API-call counter is not touched by the transfer's rebuild.
    expect(await calls.used(organization)).toBe(0);

    // Lost again: a reservation that no longer fits the rebuilt month is refused.
    await cache.del(key);
    await store(organization, { transferBytes: 950n });
    expect(await transfer.reserve(organization, 100, 6_000n)).toBeUndefined();
    expect(await transfer.used(organization)).toBe(5_950);
    expect(await transfer.reserve(organization, 50, 6_000n)).toBe(key);
    expect(stored.asked).toHaveLength(2);
  });

  it("does not make a lost counter again for a give-back", async () => {
    await store(organization, { transferBytes: 700n });
    const key = await transfer.reserve(organization, 300, 10_000n);
    expect(await transfer.used(organization)).toBe(1_000);
    await cache.del(key!);
    await transfer.release(key!, 300);
    expect(await cache.get(key!)).toBeNull();
    // The next reservation finds the counter missing and rebuilds it.
    await store(organization, { transferBytes: 200n });
    await transfer.reserve(organization, 10, 10_000n);
    expect(await transfer.used(organization)).toBe(910);
  });
});
