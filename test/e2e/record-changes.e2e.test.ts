import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nextEvent, openEventStream } from "./support/event-stream.js";
import { client } from "./support/http.js";
import {
  createApiToken,
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/** A table's change log through the gateway: the feed, the stream, and their cursors. */

type Api = ReturnType<typeof client>;

// biome-ignore lint/suspicious/noExplicitAny: changes are inspected freely
type Change = any;

function changesPath(table: TestTable) {
  return `/public/v1/databases/${table.databaseId}/tables/${table.tableId}/changes`;
}

async function feed(
  api: Api,
  token: string,
  table: TestTable,
  query: Record<string, string> = {},
): Promise<{ changes: Change[]; next: string; has_more: boolean }> {
  const response = await api("GET", changesPath(table), { token, query });
  expect(response.status, response.text).toBe(200);
  expect(response.body.message).toBe("success");
  return response.body.data;
}

/**
 * The changes after `after` once there are `count` of them: a change is on the feed once the
 * records service has given it its position, a moment after its write answered (`after=now`
 * is the read that waits for that).
 */
async function feedOnce(api: Api, token: string, table: TestTable, after: string, count: number) {
  for (const started = Date.now(); ; await new Promise((resolve) => setTimeout(resolve, 50))) {
    const read = await feedAll(api, token, table, after);
    if (read.changes.length >= count || Date.now() - started > 5_000) return read;
  }
}

/** Every change after `after`, page by page. */
async function feedAll(api: Api, token: string, table: TestTable, after?: string) {
  const all: Change[] = [];
  let cursor = after;
  for (;;) {
    const page = await feed(api, token, table, {
      limit: "7",
      ...(cursor === undefined ? {} : { after: cursor }),
    });
    all.push(...page.changes);
    cursor = page.next;
    if (!page.has_more) return { changes: all, next: cursor };
  }
}

async function write(api: Api, token: string, method: string, path: string, body?: unknown) {
  const response = await api(method, path, { token, ...(body === undefined ? {} : { body }) });
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

describe("record changes", () => {
  let sys: TestSystem;
  let api: Api;
  let tenant: Tenant;

  beforeAll(async () => {
    sys = await startTestSystem({
      RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
      CHANGE_STREAM_POLL_MS: "50",
      CHANGE_STREAM_HEARTBEAT_MS: "300",
    });
    api = client(sys.baseUrl);
    tenant = await createTenant(sys, api);
  });

  afterAll(async () => {
    await sys?.stop();
  });

  async function newTable() {
    return createTable(api, tenant, [
      { name: "Name", type: "text" },
      { name: "Age", type: "number" },
      { name: "Notes", type: "long_text" },
    ]);
  }

  it("keeps creates, updates and deletes with previous values; a no-op update is no change", async () => {
    const table = await newTable();
    const paths = v1(table.databaseId, table.tableId);
    const start = await feed(api, tenant.readToken, table, { after: "now" });
    expect(start.changes).toEqual([]);
    expect(start.has_more).toBe(false);

    const created = (
      await write(api, tenant.writeToken, "POST", paths.records, {
        data: { Name: "ann", Age: 30, Notes: "*hi*" },
      })
    ).record;
    await write(api, tenant.writeToken, "PATCH", paths.record(created.row_id), {
      data: { Name: "ann" },
    });
    await write(api, tenant.writeToken, "PATCH", paths.record(created.row_id), {
      data: { Age: 31 },
    });
    await write(api, tenant.writeToken, "DELETE", paths.record(created.row_id));

    const { changes } = await feedOnce(api, tenant.readToken, table, start.next, 3);
    expect(changes.map((c: Change) => c.type)).toEqual([
      "record.created",
      "record.updated",
      "record.deleted",
    ]);
    const [made, changed, gone] = changes;
    const name = table.id("Name");
    const age = table.id("Age");
    const notes = table.id("Notes");
    expect(made).toMatchObject({
      organization_id: tenant.orgId,
      database_id: table.databaseId,
      table_id: table.tableId,
      row_id: created.row_id,
      actor: { type: "api_token" },
      record: { row_id: created.row_id, data: { [name]: "ann", [age]: 30, [notes]: "*hi*" } },
    });
    expect(made).not.toHaveProperty("previous");
    expect(made).not.toHaveProperty("changed_fields");
    expect(made.record.created_at).toBe(created.created_at);
    expect(made.at).toBe(created.updated_at);
    expect(changed.record.data[age]).toBe(31);
    expect(changed.previous).toEqual({ [age]: 30 });
    expect(changed.changed_fields).toEqual([age]);
    expect(gone.record).toBeNull();
    expect(gone.previous).toEqual({ [name]: "ann", [age]: 31, [notes]: "*hi*" });
    expect(gone).not.toHaveProperty("changed_fields");
    // Each change_id is a cursor: after the first, the other two.
    const rest = await feedAll(api, tenant.readToken, table, made.change_id);
    expect(rest.changes.map((c: Change) => c.change_id)).toEqual([
      changed.change_id,
      gone.change_id,
    ]);

    // Names, a field selection and rendered long text apply to record, previous and changed_fields.
    const named = await feed(api, tenant.readToken, table, {
      after: start.next,
      response_format: "names",
      fields: "Age,Notes",
      rich_text: "plain",
    });
    expect(named.changes[0].record.data).toEqual({ Age: 30, Notes: "hi" });
    expect(named.changes[1].changed_fields).toEqual(["Age"]);
    expect(named.changes[2].previous).toEqual({ Age: 31, Notes: "hi" });
  });

  it("pages with next and has_more, filters by type and by where on the record", async () => {
    const table = await newTable();
    const paths = v1(table.databaseId, table.tableId);
    const batch = await write(api, tenant.writeToken, "POST", paths.batch, {
      records: Array.from({ length: 5 }, (_, i) => ({ data: { Name: `n${i}`, Age: i } })),
    });
    const ids = batch.records.map((r: { row_id: number }) => r.row_id);
    await write(api, tenant.writeToken, "POST", paths.batchDelete, { row_ids: [ids[3]] });

    const first = await feed(api, tenant.readToken, table, { limit: "2" });
    expect(first.changes.map((c: Change) => c.row_id)).toEqual(ids.slice(0, 2));
    expect(first.has_more).toBe(true);
    const second = await feed(api, tenant.readToken, table, { limit: "10", after: first.next });
    expect(second.changes.map((c: Change) => [c.type, c.row_id])).toEqual([
      ["record.created", ids[2]],
      ["record.created", ids[3]],
      ["record.created", ids[4]],
      ["record.deleted", ids[3]],
    ]);
    expect(second.has_more).toBe(false);
    const end = await feed(api, tenant.readToken, table, { after: second.next });
    expect(end).toEqual({ changes: [], next: second.next, has_more: false });

    const deletions = await feed(api, tenant.readToken, table, { types: "record.deleted" });
    expect(deletions.changes.map((c: Change) => c.row_id)).toEqual([ids[3]]);
    // A deletion matches `where` on the record before it.
    const matched = await feed(api, tenant.readToken, table, { where: "(Age,gte,3)" });
    expect(matched.changes.map((c: Change) => [c.type, c.row_id])).toEqual([
      ["record.created", ids[3]],
      ["record.created", ids[4]],
      ["record.deleted", ids[3]],
    ]);
  });

  it("refuses a cursor that does not parse or names another table, and a bad where or type", async () => {
    const table = await newTable();
    const other = await newTable();
    const cursor = (await feed(api, tenant.readToken, other, { after: "now" })).next;
    for (const after of ["nonsense", cursor]) {
      const response = await api("GET", changesPath(table), {
        token: tenant.readToken,
        query: { after },
      });
      expect(response.status).toBe(400);
      expect(response.body.extra).toEqual([
        expect.objectContaining({ key: "after", source: "query" }),
      ]);
    }
    // A refused stream answers at once, in the validation envelope, naming the header.
    const header = await api("GET", `${changesPath(table)}/stream`, {
      token: tenant.readToken,
      headers: { "last-event-id": cursor },
    });
    expect(header.status).toBe(400);
    expect(header.body.extra).toEqual([
      expect.objectContaining({ key: "Last-Event-ID", source: "header" }),
    ]);
    const refused: Record<string, string>[] = [
      { where: "(Nope,eq,1)" },
      { types: "record.moved" },
      { limit: "0" },
    ];
    for (const query of refused) {
      const response = await api("GET", changesPath(table), { token: tenant.readToken, query });
      expect(response.status, JSON.stringify(query)).toBe(400);
    }
  });

  it("streams live changes with a heartbeat, and resumes from Last-Event-ID with no gap and no duplicate while 4 writers commit", async () => {
    const table = await newTable();
    const paths = v1(table.databaseId, table.tableId);
    const url = `${sys.baseUrl}${changesPath(table)}/stream`;
    const start = (await feed(api, tenant.readToken, table, { after: "now" })).next;
    let stream = await openEventStream(url, tenant.readToken, { "last-event-id": start });
    expect(stream.status).toBe(200);
    expect(stream.headers.get("content-type")).toMatch(/^text\/event-stream/);

    const WRITERS = 4;
    const EACH = 15;
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      for (let i = 0; i < EACH; i++) {
        const made = await write(api, tenant.writeToken, "POST", paths.records, {
          data: { Name: `w${w}-${i}`, Age: i },
        });
        await write(api, tenant.writeToken, "PATCH", paths.record(made.record.row_id), {
          data: { Age: i + 100 },
        });
      }
    });
    const total = WRITERS * EACH * 2;
    const seen: Change[] = [];
    let lastId: string | undefined;
    let reconnected = false;
    while (seen.length < total) {
      const event = await stream.next();
      if (event === undefined) throw new Error("the stream ended");
      if (event.comment !== undefined) continue;
      expect(event.event).toMatch(/^record\.(created|updated)$/);
      const change = JSON.parse(event.data!);
      expect(change.change_id).toBe(event.id);
      expect(change.type).toBe(event.event);
      seen.push(change);
      lastId = event.id;
      if (!reconnected && seen.length === total / 3) {
        // The client goes away mid-burst and comes back with the last id it saw.
        stream.close();
        stream = await openEventStream(url, tenant.readToken, { "last-event-id": lastId! });
        expect(stream.status).toBe(200);
        reconnected = true;
      }
    }
    await Promise.all(writers);
    // A heartbeat comes while the stream is idle.
    let beat = await stream.next();
    while (beat?.comment !== "keep-alive") beat = await stream.next();
    stream.close();

    const ids = seen.map((change) => change.change_id);
    expect(new Set(ids).size).toBe(total);
    // The stream saw exactly the log, in its order.
    const logged = await feedAll(api, tenant.readToken, table, start);
    expect(ids).toEqual(logged.changes.map((c: Change) => c.change_id));
    // Every record's create comes before its update.
    const createdAt = new Map<number, number>();
    seen.forEach((change, index) => {
      if (change.type === "record.created") createdAt.set(change.row_id, index);
      else expect(createdAt.get(change.row_id)).toBeLessThan(index);
    });
  });

  it("ends a stream whose API token is revoked", async () => {
    const table = await newTable();
    const token = await createApiToken(api, tenant.owner, tenant.orgId, "read");
    const stream = await openEventStream(`${sys.baseUrl}${changesPath(table)}/stream`, token);
    expect(stream.status).toBe(200);
    const tokens = await api("GET", "/api_token/list", {
      token: tenant.owner.token,
      query: { organization_id: String(tenant.orgId) },
    });
    const id = tokens.body.data.api_tokens.find((t: { token_id: number; token_prefix: string }) =>
      token.startsWith(t.token_prefix),
    ).token_id;
    const revoked = await api("POST", "/api_token/revoke", {
      token: tenant.owner.token,
      query: { organization_id: String(tenant.orgId), token_id: String(id) },
    });
    expect(revoked.status, revoked.text).toBe(200);
    // The next heartbeat finds the token gone and ends the stream.
    expect(await nextEvent(stream)).toBeUndefined();
    const again = await api("GET", `${changesPath(table)}/stream`, { token });
    expect(again.status).toBe(401);
  });

  it("caps open streams at the plan's change_streams across the organization", async () => {
    // An organization of its own: the other tests' streams give their slots back as they end.
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const url = `${sys.baseUrl}${changesPath(table)}/stream`;
    const open = [];
    for (let i = 0; i < 5; i++) {
      const stream = await openEventStream(url, tenant.readToken, {});
      expect(stream.status).toBe(200);
      open.push(stream);
    }
    const refused = await api("GET", `${changesPath(table)}/stream`, { token: tenant.readToken });
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ message: "too_many_requests", data: {} });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    open.pop()!.close();
    // The slot comes back once the gateway has seen the client leave.
    let again = await openEventStream(url, tenant.readToken, {});
    while (again.status === 429) again = await openEventStream(url, tenant.readToken, {});
    expect(again.status).toBe(200);
    again.close();
    for (const stream of open) stream.close();
  });
});

describe("record changes past the retention", () => {
  let sys: TestSystem;
  let api: Api;
  let tenant: Tenant;

  beforeAll(async () => {
    sys = await startTestSystem({
      RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
      CHANGE_RETENTION_SECONDS: "1",
      CHANGE_STREAM_POLL_MS: "50",
    });
    api = client(sys.baseUrl);
    tenant = await createTenant(sys, api);
  });

  afterAll(async () => {
    // The last test stops the system itself; stopping twice is harmless.
    await sys?.stop().catch(() => {});
  });

  it("answers 410 cursor_expired on the feed and a reset event on the stream", async () => {
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const paths = v1(table.databaseId, table.tableId);
    await write(api, tenant.writeToken, "POST", paths.batch, {
      records: [{ data: { Name: "a" } }, { data: { Name: "b" } }],
    });
    const { changes } = await feed(api, tenant.readToken, table);
    expect(changes).toHaveLength(2);
    const old = changes[0].change_id;
    // Retention removes both; the cursor between them has then lost what followed it.
    let response = await api("GET", changesPath(table), {
      token: tenant.readToken,
      query: { after: old },
    });
    while (response.status === 200) {
      response = await api("GET", changesPath(table), {
        token: tenant.readToken,
        query: { after: old },
      });
    }
    expect(response.status).toBe(410);
    expect(response.body).toEqual({ message: "cursor_expired", data: {} });

    const stream = await openEventStream(
      `${sys.baseUrl}${changesPath(table)}/stream`,
      tenant.readToken,
      {
        "last-event-id": old,
      },
    );
    expect(stream.status).toBe(200);
    const reset = await nextEvent(stream);
    expect(reset?.event).toBe("reset");
    const next = JSON.parse(reset!.data!).next as string;
    expect(reset?.id).toBe(next);
    // The stream goes on from the present end.
    const made = await write(api, tenant.writeToken, "POST", paths.records, {
      data: { Name: "c" },
    });
    const live = await nextEvent(stream);
    expect(live?.event).toBe("record.created");
    expect(JSON.parse(live!.data!).row_id).toBe(made.record.row_id);
    stream.close();
  });

  it("ends open streams cleanly when the gateway stops, so that clients reconnect elsewhere", async () => {
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const stream = await openEventStream(
      `${sys.baseUrl}${changesPath(table)}/stream?after=now`,
      tenant.readToken,
    );
    expect(stream.status).toBe(200);
    expect(await stream.next()).toEqual({ comment: "open" });
    const stopping = sys.stop();
    // The server ends the response (the reader is done) rather than cutting the connection
    // after the drain timeout (the reader would fail).
    expect(await nextEvent(stream)).toBeUndefined();
    await stopping;
  });
});
