import { processMetricsRegistry } from "@rowbase/kit";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { addMember, expectError, q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";
import { type Received, startReceiver, verified } from "./support/webhook-receiver.js";

/**
 * Deliveries to a receiver on loopback (let through by WEBHOOK_ALLOWED_TARGETS, which names its
 * port): every request's signature is checked with the Standard Webhooks reference library.
 */

type Api = ReturnType<typeof client>;
// biome-ignore lint/suspicious/noExplicitAny: payloads are inspected freely
type Payload = any;

const EVENTUALLY = { timeout: 30_000, interval: 100 };

let sys: TestSystem;
let api: Api;
let tenant: Tenant;
let admin: SignedUpUser;
let receiver: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  receiver = await startReceiver();
  sys = await startTestSystem({
    RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
    WEBHOOK_ALLOWED_TARGETS: `127.0.0.1:${receiver.port}`,
    WEBHOOK_RETRY_SCHEDULE: "1,1,1,1,1,1",
    WEBHOOK_TIMEOUT_MS: "5000",
    WEBHOOK_POLL_MS: "50",
  });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api, { plan: "business" });
  admin = await signUp(sys, api);
  await addMember(api, tenant.owner, tenant.orgId, admin, "admin");
});

afterAll(async () => {
  await sys?.stop();
  await receiver?.close();
});

async function newTable(): Promise<TestTable> {
  return createTable(api, tenant, [
    { name: "Name", type: "text" },
    { name: "Age", type: "number" },
  ]);
}

async function createWebhook(table: TestTable, body: Record<string, unknown>) {
  const response = await api("POST", "/webhook/create", {
    token: tenant.owner.token,
    query: q({ table_id: table.tableId }),
    body,
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data as { webhook: Payload; secret: string };
}

async function write(method: string, path: string, body?: unknown) {
  const response = await api(method, path, {
    token: tenant.writeToken,
    ...(body === undefined ? {} : { body }),
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

async function getWebhook(id: number) {
  const response = await api("GET", "/webhook/get", {
    token: tenant.owner.token,
    query: q({ webhook_id: id }),
  });
  expect(response.status).toBe(200);
  return response.body.data.webhook;
}

async function deliveries(id: number, query: Record<string, string | number> = {}) {
  const response = await api("GET", "/webhook/deliveries", {
    token: tenant.owner.token,
    query: q({ webhook_id: id, ...query }),
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data as { deliveries: Payload[]; total: number };
}

/** Every change of the table after `after`, from the feed. */
async function feed(table: TestTable, after: string): Promise<Payload[]> {
  const all: Payload[] = [];
  let cursor = after;
  for (;;) {
    const response = await api(
      "GET",
      `/public/v1/databases/${table.databaseId}/tables/${table.tableId}/changes`,
      { token: tenant.readToken, query: { after: cursor, limit: "1000" } },
    );
    expect(response.status).toBe(200);
    all.push(...response.body.data.changes);
    cursor = response.body.data.next;
    if (!response.body.data.has_more) return all;
  }
}

async function presentEnd(table: TestTable): Promise<string> {
  const response = await api(
    "GET",
    `/public/v1/databases/${table.databaseId}/tables/${table.tableId}/changes`,
    { token: tenant.readToken, query: { after: "now" } },
  );
  return response.body.data.next;
}

/** Verifies every request to `path` with `secret` and answers their payloads in arrival order. */
function payloadsAt(path: string, secret: string): { request: Received; payload: Payload }[] {
  return receiver.at(path).map((request) => ({ request, payload: verified(secret, request) }));
}

describe("webhook deliveries", () => {
  it("POSTs each matching change, signed, with the change as the body", async () => {
    const table = await newTable();
    const path = `/signed-${table.tableId}`;
    const { webhook, secret } = await createWebhook(table, { url: receiver.url(path) });
    const filtered = await createWebhook(table, {
      url: receiver.url(`${path}-filtered`),
      events: ["record.updated", "record.deleted"],
      where: "(Age,gte,30)",
    });
    const start = await presentEnd(table);
    const paths = v1(table.databaseId, table.tableId);
    const ann = (await write("POST", paths.records, { data: { Name: "ann", Age: 20 } })).record;
    const bob = (await write("POST", paths.records, { data: { Name: "bob", Age: 40 } })).record;
    await write("PATCH", paths.record(ann.row_id), { data: { Age: 21 } });
    await write("PATCH", paths.record(bob.row_id), { data: { Age: 41 } });
    await write("DELETE", paths.record(bob.row_id));

    const changes = await feed(table, start);
    expect(changes).toHaveLength(5);
    await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBe(5);
    const got = payloadsAt(path, secret);
    // Every change, as the feed gives it, in the order of each record's changes.
    expect(got.map(({ payload }) => payload).sort(byChange)).toEqual([...changes].sort(byChange));
    for (const rowId of [ann.row_id, bob.row_id]) {
      expect(
        got
          .filter(({ payload }) => payload.row_id === rowId)
          .map(({ payload }) => payload.change_id),
      ).toEqual(changes.filter((c) => c.row_id === rowId).map((c) => c.change_id));
    }
    for (const { request } of got) {
      expect(request.headers["content-type"]).toBe("application/json");
      expect(request.headers["user-agent"]).toBe("Rowbase-Webhooks/1");
      expect(request.headers["webhook-id"]).toMatch(/^msg_/);
      expect(Number(request.headers["webhook-timestamp"])).toBeGreaterThan(1_700_000_000);
    }
    expect(new Set(got.map(({ request }) => request.headers["webhook-id"])).size).toBe(5);

    // The filtered webhook got only bob's update and deletion (Age >= 30, not a creation).
    await expect.poll(() => receiver.at(`${path}-filtered`).length, EVENTUALLY).toBe(2);
    const filteredGot = payloadsAt(`${path}-filtered`, filtered.secret);
    expect(filteredGot.map(({ payload }) => [payload.type, payload.row_id])).toEqual([
      ["record.updated", bob.row_id],
      ["record.deleted", bob.row_id],
    ]);

    await expect
      .poll(async () => (await deliveries(webhook.webhook_id)).deliveries.map((d) => d.status))
      .toEqual(["succeeded", "succeeded", "succeeded", "succeeded", "succeeded"]);
    const log = await deliveries(webhook.webhook_id, { limit: 2 });
    expect(log.total).toBe(5);
    expect(log.deliveries).toHaveLength(2);
    expect(log.deliveries[0]).toEqual({
      delivery_id: expect.any(Number),
      webhook_id: webhook.webhook_id,
      change_id: changes[4].change_id,
      event: "record.deleted",
      status: "succeeded",
      attempts: 1,
      response_status: 200,
      error: null,
      duration_ms: expect.any(Number),
      created_at: expect.stringMatching(/Z$/),
      next_attempt_at: null,
    });
    const after = await getWebhook(webhook.webhook_id);
    expect(after.consecutive_failures).toBe(0);
    expect(after.last_delivery_at).toEqual(expect.stringMatching(/Z$/));
  });

  it("sends every change to each of two webhooks on one table, the second from its creation on", async () => {
    const table = await newTable();
    const paths = v1(table.databaseId, table.tableId);
    const first = await createWebhook(table, { url: receiver.url(`/pair-a-${table.tableId}`) });
    const startA = await presentEnd(table);
    const batch = async (from: number) =>
      (
        await write("POST", paths.batch, {
          records: Array.from({ length: 30 }, (_, i) => ({ data: { Name: `r${from + i}` } })),
        })
      ).records.map((record: Payload) => record.row_id as number);
    const early = await batch(0);
    // The second starts at the present end, while the first may still be reading behind it;
    // once both have caught up they read the table's pages together.
    const second = await createWebhook(table, { url: receiver.url(`/pair-b-${table.tableId}`) });
    const startB = await presentEnd(table);
    const late = await batch(30);
    await write("PATCH", paths.batch, {
      records: [...early, ...late].map((rowId, i) => ({ row_id: rowId, data: { Age: i } })),
    });
    await write("DELETE", paths.record(late[0]!));

    for (const [hook, start, changes] of [
      [first, startA, 30 + 30 + 60 + 1],
      [second, startB, 30 + 60 + 1],
    ] as const) {
      const path = `/pair-${hook === first ? "a" : "b"}-${table.tableId}`;
      const expected = await feed(table, start);
      expect(expected).toHaveLength(changes);
      await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBeGreaterThanOrEqual(changes);
      const got = payloadsAt(path, hook.secret);
      const ids = new Set(got.map(({ request }) => request.headers["webhook-id"]));
      expect(ids.size).toBe(changes);
      for (const id of ids) expect(id).toMatch(new RegExp(`^msg_${hook.webhook.webhook_id}_`));
      // Each change once (at least once: duplicates would share a webhook-id), each record's in
      // its order.
      const firstOf = new Map(
        got.map(({ request, payload }) => [request.headers["webhook-id"], payload]),
      );
      expect([...firstOf.values()].sort(byChange)).toEqual([...expected].sort(byChange));
      for (const rowId of new Set(expected.map((change) => change.row_id))) {
        expect(
          [...firstOf.values()]
            .filter((payload) => payload.row_id === rowId)
            .map((payload) => payload.change_id),
        ).toEqual(expected.filter((c) => c.row_id === rowId).map((c) => c.change_id));
      }
    }
  });

  it("delivers every change through a receiver that fails for a while, each record in order", async () => {
    const table = await newTable();
    const path = `/faulty-${table.tableId}`;
    let failuresLeft = 25;
    receiver.answer(({ path: at }) => {
      if (at !== path) return 200;
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        return 500;
      }
      return 200;
    });
    const { webhook, secret } = await createWebhook(table, { url: receiver.url(path) });
    const start = await presentEnd(table);
    const paths = v1(table.databaseId, table.tableId);
    const rows = (
      await write("POST", paths.batch, {
        records: Array.from({ length: 8 }, (_, i) => ({ data: { Name: `r${i}`, Age: i } })),
      })
    ).records as { row_id: number }[];
    for (let round = 1; round <= 3; round++) {
      await Promise.all(
        rows.map((row) => write("PATCH", paths.record(row.row_id), { data: { Age: 100 * round } })),
      );
    }
    const changes = await feed(table, start);
    expect(changes).toHaveLength(32);
    const ids = new Set(changes.map((c) => c.change_id));

    await expect
      .poll(
        () =>
          new Set(
            payloadsAt(path, secret)
              .filter(({ request }) => request.answered === 200)
              .map(({ payload }) => payload.change_id),
          ).size,
        EVENTUALLY,
      )
      .toBe(32);
    expect(failuresLeft).toBe(0);
    const got = payloadsAt(path, secret);
    // Each change under one webhook-id, however often it was tried.
    const idsOf = new Map<string, Set<string>>();
    for (const { request, payload } of got) {
      expect(ids.has(payload.change_id)).toBe(true);
      const seen = idsOf.get(payload.change_id) ?? new Set();
      seen.add(request.headers["webhook-id"] as string);
      idsOf.set(payload.change_id, seen);
    }
    expect([...idsOf.values()].every((seen) => seen.size === 1)).toBe(true);
    // Per record, a change arrived only after the one before it had succeeded.
    const position = new Map(changes.map((c, i) => [c.change_id, i]));
    for (const row of rows) {
      const arrivals = got.filter(({ payload }) => payload.row_id === row.row_id);
      const order = arrivals.map(({ payload }) => position.get(payload.change_id)!);
      expect(order).toEqual([...order].sort((a, b) => a - b));
      for (let i = 1; i < arrivals.length; i++) {
        if (order[i] !== order[i - 1]) expect(arrivals[i - 1]!.request.answered).toBe(200);
      }
    }
    await expect
      .poll(async () => (await deliveries(webhook.webhook_id, { status: "pending" })).total)
      .toBe(0);
    const failedAttempts = (await deliveries(webhook.webhook_id, { limit: 100 })).deliveries
      .map((d) => d.attempts - 1)
      .reduce((a, b) => a + b, 0);
    expect(failedAttempts).toBe(25);
    expect((await getWebhook(webhook.webhook_id)).active).toBe(true);
    receiver.answer(() => 200);

    // The metrics of this process (every service runs in it here) saw the attempts and the queue.
    const metrics = processMetricsRegistry();
    const attempts = await metrics
      .getSingleMetric("rowbase_webhook_delivery_attempts_total")!
      .get();
    const count = (outcome: string) =>
      attempts.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
    expect(count("retry")).toBeGreaterThanOrEqual(25);
    expect(count("succeeded")).toBeGreaterThanOrEqual(32);
    const latency = await metrics.getSingleMetric("rowbase_webhook_attempt_seconds")!.get();
    const timed = latency.values
      .filter((v) => (v as { metricName?: string }).metricName?.endsWith("_count"))
      .reduce((sum, v) => sum + v.value, 0);
    expect(timed).toBeGreaterThanOrEqual(57);
    const gauge = async (name: string) =>
      (await metrics.getSingleMetric(name)!.get()).values[0]?.value;
    expect(await gauge("rowbase_webhook_pending_deliveries")).toBe(0);
    expect(await gauge("rowbase_webhook_oldest_pending_age_seconds")).toBe(0);
  });

  it("signs with both secrets for a day after a rotation", async () => {
    const table = await newTable();
    const path = `/rotated-${table.tableId}`;
    const { webhook, secret: old } = await createWebhook(table, { url: receiver.url(path) });
    const rotated = await api("POST", "/webhook/rotate_secret", {
      token: tenant.owner.token,
      query: q({ webhook_id: webhook.webhook_id }),
    });
    const fresh = rotated.body.data.secret as string;
    await write("POST", v1(table.databaseId, table.tableId).records, { data: { Name: "x" } });
    await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBe(1);
    const [request] = receiver.at(path);
    expect((request!.headers["webhook-signature"] as string).split(" ")).toHaveLength(2);
    expect(verified(fresh, request!)).toEqual(verified(old, request!));
  });

  it("sends a test event once before answering, and refuses a name that resolves where it may not go", async () => {
    const table = await newTable();
    const path = `/test-${table.tableId}`;
    const { webhook, secret } = await createWebhook(table, { url: receiver.url(path) });
    const tested = await api("POST", "/webhook/test", {
      token: admin.token,
      query: q({ webhook_id: webhook.webhook_id }),
    });
    expect(tested.status, tested.text).toBe(200);
    expect(tested.body.data.delivery).toMatchObject({
      webhook_id: webhook.webhook_id,
      change_id: null,
      event: "webhook.test",
      status: "succeeded",
      attempts: 1,
      response_status: 200,
      next_attempt_at: null,
    });
    // Answered after the attempt: the receiver has it already.
    expect(receiver.at(path)).toHaveLength(1);
    expect(payloadsAt(path, secret)[0]!.payload).toEqual({
      type: "webhook.test",
      webhook_id: webhook.webhook_id,
      at: expect.stringMatching(/Z$/),
    });

    // localhost is a name: it is let through at create, and refused when the attempt connects
    // (the allowed target is the receiver's port only).
    const elsewhere = await createWebhook(table, {
      url: `http://localhost:${receiver.port + 1}/x`,
    });
    const refused = await api("POST", "/webhook/test", {
      token: tenant.owner.token,
      query: q({ webhook_id: elsewhere.webhook.webhook_id }),
    });
    expect(refused.body.data.delivery).toMatchObject({
      status: "failed",
      error: "address_forbidden",
      response_status: null,
    });
    expect((await getWebhook(elsewhere.webhook.webhook_id)).consecutive_failures).toBe(0);
  });

  it("redelivers a delivery's change with the same webhook-id", async () => {
    const table = await newTable();
    const path = `/again-${table.tableId}`;
    const { webhook, secret } = await createWebhook(table, { url: receiver.url(path) });
    await write("POST", v1(table.databaseId, table.tableId).records, { data: { Name: "x" } });
    await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBe(1);
    await expect
      .poll(async () => (await deliveries(webhook.webhook_id)).deliveries[0]?.status)
      .toBe("succeeded");
    const [first] = (await deliveries(webhook.webhook_id)).deliveries;
    const again = await api("POST", "/webhook/redeliver", {
      token: tenant.owner.token,
      query: q({ delivery_id: first.delivery_id }),
    });
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.delivery).toMatchObject({
      change_id: first.change_id,
      event: "record.created",
      status: "pending",
      attempts: 0,
    });
    await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBe(2);
    const [one, two] = payloadsAt(path, secret);
    expect(two!.request.headers["webhook-id"]).toBe(one!.request.headers["webhook-id"]);
    expect(two!.payload).toEqual(one!.payload);
    expect((await deliveries(webhook.webhook_id)).total).toBe(2);

    const stranger = await createTenant(sys, api);
    for (const [token, id] of [
      [stranger.owner.token, first.delivery_id],
      [tenant.owner.token, 987_654_321],
    ] as const) {
      expectError(
        await api("POST", "/webhook/redeliver", { token, query: q({ delivery_id: id }) }),
        404,
        "delivery_not_found",
      );
    }
    expectError(
      await api("GET", "/webhook/deliveries", {
        token: stranger.owner.token,
        query: q({ webhook_id: webhook.webhook_id }),
      }),
      404,
      "webhook_not_found",
    );
    const bad = await api("GET", "/webhook/deliveries", {
      token: tenant.owner.token,
      query: q({ webhook_id: webhook.webhook_id, limit: 101, status: "done" }),
    });
    expect(bad.status).toBe(400);
    expect(bad.body.extra.map((item: { key: string }) => item.key).sort()).toEqual([
      "limit",
      "status",
    ]);
    expect((await deliveries(webhook.webhook_id)).total).toBe(2);
  });

  it("stops a webhook at once on 410 Gone", async () => {
    const table = await newTable();
    const path = `/gone-${table.tableId}`;
    receiver.answer(({ path: at }) => (at === path ? 410 : 200));
    const { webhook } = await createWebhook(table, { url: receiver.url(path) });
    await write("POST", v1(table.databaseId, table.tableId).records, { data: { Name: "x" } });
    await expect
      .poll(async () => (await getWebhook(webhook.webhook_id)).disabled_reason, EVENTUALLY)
      .toBe("gone");
    const stopped = await getWebhook(webhook.webhook_id);
    expect(stopped.active).toBe(false);
    const [delivery] = (await deliveries(webhook.webhook_id)).deliveries;
    expect(delivery).toMatchObject({ status: "failed", attempts: 1, response_status: 410 });
    // Switched on again, it goes on from the changes made after that.
    receiver.answer(() => 200);
    const on = await api("POST", "/webhook/update", {
      token: tenant.owner.token,
      query: q({ webhook_id: webhook.webhook_id }),
      body: { active: true },
    });
    expect(on.body.data.webhook).toMatchObject({ active: true, disabled_reason: null });
    await write("POST", v1(table.databaseId, table.tableId).records, { data: { Name: "y" } });
    await expect
      .poll(() => receiver.at(path).filter((r) => r.answered === 200).length, EVENTUALLY)
      .toBe(1);
    expect(JSON.parse(receiver.at(path).at(-1)!.body).record.data).toMatchObject({
      [table.id("Name")]: "y",
    });
  });

  it("stops a webhook whose delivery failed for good, and mails the owner and admins", async () => {
    const table = await newTable();
    const path = `/failing-${table.tableId}`;
    receiver.answer(({ path: at }) => (at === path ? 503 : 200));
    const { webhook } = await createWebhook(table, { url: receiver.url(path) });
    const mails = sys.mail.messages.length;
    await write("POST", v1(table.databaseId, table.tableId).records, { data: { Name: "x" } });
    await expect
      .poll(async () => (await getWebhook(webhook.webhook_id)).disabled_reason, EVENTUALLY)
      .toBe("failures");
    const stopped = await getWebhook(webhook.webhook_id);
    expect(stopped).toMatchObject({ active: false, consecutive_failures: 7 });
    const [delivery] = (await deliveries(webhook.webhook_id)).deliveries;
    expect(delivery).toMatchObject({
      status: "failed",
      attempts: 7,
      response_status: 503,
      next_attempt_at: null,
    });
    expect(receiver.at(path)).toHaveLength(7);
    await expect
      .poll(() =>
        sys.mail.messages
          .slice(mails)
          .filter((m) => m.subject.includes("webhook"))
          .flatMap((m) => m.to)
          .sort(),
      )
      .toEqual([admin.email, tenant.owner.email].sort());
    receiver.answer(() => 200);
  });
});

describe("failures in a row", () => {
  it("stops a webhook at its 50th failed attempt in a row, and fails what it had pending", async () => {
    const table = await newTable();
    const path = `/streak-${table.tableId}`;
    receiver.answer(({ path: at }) => (at === path ? 500 : 200));
    const { webhook } = await createWebhook(table, { url: receiver.url(path) });
    // 49 attempts failed in a row already (as over many deliveries): the next failure is the 50th.
    const db = new pg.Client({ connectionString: sys.databaseUrl });
    await db.connect();
    try {
      await db.query("update webhooks.webhook set consecutive_failures = 49 where id = $1", [
        webhook.webhook_id,
      ]);
    } finally {
      await db.end();
    }
    const mails = sys.mail.messages.length;
    await write("POST", v1(table.databaseId, table.tableId).records, { data: { Name: "x" } });
    await expect
      .poll(async () => (await getWebhook(webhook.webhook_id)).disabled_reason, EVENTUALLY)
      .toBe("failures");
    expect(await getWebhook(webhook.webhook_id)).toMatchObject({
      active: false,
      consecutive_failures: 50,
    });
    expect(receiver.at(path)).toHaveLength(1);
    // Its delivery had retries left; the stop failed it.
    const [delivery] = (await deliveries(webhook.webhook_id)).deliveries;
    expect(delivery).toMatchObject({
      status: "failed",
      attempts: 1,
      response_status: 500,
      error: "webhook_disabled",
      next_attempt_at: null,
    });
    await expect
      .poll(() =>
        sys.mail.messages
          .slice(mails)
          .flatMap((m) => m.to)
          .sort(),
      )
      .toEqual([admin.email, tenant.owner.email].sort());
    receiver.answer(() => 200);
  });
});

function byChange(a: Payload, b: Payload): number {
  return a.change_id < b.change_id ? -1 : a.change_id > b.change_id ? 1 : 0;
}
