import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { type NatsServerProcess, startNatsServer } from "@rowbase/kit/testing";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";
import { startReceiver, verified } from "./support/webhook-receiver.js";

/**
 * Nothing a webhook matched is lost when the webhooks service stops in the middle of a burst of
 * changes, when its process is killed (SIGKILL) there, when a worker dies holding a delivery,
 * when NATS is down, or when its PostgreSQL is: the receiver (on loopback, every signature
 * checked with the reference library) gets every change.
 */

type Api = ReturnType<typeof client>;
// biome-ignore lint/suspicious/noExplicitAny: payloads are inspected freely
type Payload = any;

const EVENTUALLY = { timeout: 120_000, interval: 200 };
const SLOW = 240_000;
const BURST = 1000;

async function setUp(sys: TestSystem, api: Api) {
  const tenant = await createTenant(sys, api, { plan: "business" });
  const table = await createTable(api, tenant, [{ name: "N", type: "number" }]);
  return { tenant, table };
}

async function createWebhook(api: Api, tenant: Tenant, table: TestTable, url: string) {
  const response = await api("POST", "/webhook/create", {
    token: tenant.owner.token,
    query: q({ table_id: table.tableId }),
    body: { url },
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data as { webhook: Payload; secret: string };
}

/** `count` records created by `batches` batch calls, numbered from `from`. */
async function burst(api: Api, tenant: Tenant, table: TestTable, from: number, count: number) {
  const path = v1(table.databaseId, table.tableId).batch;
  for (let i = 0; i < count; i += 100) {
    const response = await api("POST", path, {
      token: tenant.writeToken,
      body: {
        records: Array.from({ length: Math.min(100, count - i) }, (_, k) => ({
          data: { N: from + i + k },
        })),
      },
    });
    expect(response.status, response.text).toBe(200);
  }
}

/** The distinct values of N the receiver got at `path`, each request verified. */
function delivered(
  receiver: Awaited<ReturnType<typeof startReceiver>>,
  path: string,
  secret: string,
) {
  const values = new Set<number>();
  for (const request of receiver.at(path)) {
    const payload = verified(secret, request) as Payload;
    values.add(payload.record.data[Object.keys(payload.record.data)[0]!]);
  }
  return values;
}

describe("the webhooks service away mid-burst", () => {
  let sys: TestSystem;
  let api: Api;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    sys = await startTestSystem({
      RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
      WEBHOOK_ALLOWED_TARGETS: `127.0.0.1:${receiver.port}`,
      WEBHOOK_RETRY_SCHEDULE: "1,1,1",
      WEBHOOK_POLL_MS: "50",
    });
    api = client(sys.baseUrl);
  });

  afterAll(async () => {
    await sys?.stop();
    await receiver?.close();
  });

  it(
    "delivers every change of a burst of 1,000 when the service stops in its middle and comes back",
    async () => {
      const { tenant, table } = await setUp(sys, api);
      const path = `/away-${table.tableId}`;
      const { secret } = await createWebhook(api, tenant, table, receiver.url(path));
      await burst(api, tenant, table, 0, BURST / 2);
      // Stopped while it is following and delivering the first half.
      await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBeGreaterThan(0);
      await sys.system.stopService("webhooks");
      const before = delivered(receiver, path, secret).size;
      await burst(api, tenant, table, BURST / 2, BURST / 2);
      expect(receiver.at(path).length).toBeLessThan(BURST);
      // Started again where the gateway reaches it.
      await sys.replica("webhooks", { GRPC_PORT: new URL(sys.system.grpcUrls.webhooks).port });
      await expect.poll(() => delivered(receiver, path, secret).size, EVENTUALLY).toBe(BURST);
      expect(before).toBeLessThan(BURST);
      expect([...delivered(receiver, path, secret)].sort((a, b) => a - b)).toEqual(
        Array.from({ length: BURST }, (_, i) => i),
      );
    },
    SLOW,
  );

  it("tries a delivery again once the lease of a worker that died holding it has run out", async () => {
    const { tenant, table } = await setUp(sys, api);
    const path = `/orphan-${table.tableId}`;
    const { webhook, secret } = await createWebhook(api, tenant, table, receiver.url(path));
    const db = new pg.Client({ connectionString: sys.databaseUrl });
    await db.connect();
    try {
      // What a worker leaves when it dies mid-attempt: a pending delivery under its lease.
      const body = JSON.stringify({ type: "record.created", orphan: true });
      const { rows } = await db.query(
        `insert into webhooks.delivery (webhook_id, message_id, change_id, event, row_id, payload,
           next_attempt_at, lease, lease_until)
         values ($1, 'msg_orphan', 'orphan', 'record.created', 1, $2, now(), 'dead-worker',
           now() + interval '2 seconds')
         returning id`,
        [webhook.webhook_id, body],
      );
      await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBe(1);
      const [request] = receiver.at(path);
      expect(request!.headers["webhook-id"]).toBe("msg_orphan");
      expect(verified(secret, request!)).toEqual(JSON.parse(body));
      await expect
        .poll(async () => {
          const found = await db.query(
            "select status, attempts from webhooks.delivery where id = $1",
            [rows[0].id],
          );
          return found.rows[0];
        })
        .toEqual({ status: "succeeded", attempts: 1 });
    } finally {
      await db.end();
    }
  });
});

/** The repository's root, where the service's own entry point runs from. */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The webhooks service as a process of its own (its main.ts, as Kubernetes runs it), pointed at
 * the system's database and services, on the port the gateway calls; resolves once it listens.
 * It keeps its cache in memory and has no bus: it needs neither to deliver.
 */
async function startWebhooksProcess(sys: TestSystem, env: Record<string, string>) {
  const urls = sys.system.grpcUrls;
  // One process (tsx as a loader, not its CLI, which would run the service in a child of its own
  // that a kill would leave behind).
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--conditions=@rowbase/source", "services/webhooks/src/main.ts"],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: sys.databaseUrl,
        DATABASE_POOL_MAX: "4",
        INTERNAL_JWT_SECRET: sys.internalJwtSecret,
        GRPC_HOST: "127.0.0.1",
        GRPC_PORT: new URL(urls.webhooks).port,
        ORGANIZATION_GRPC_URL: urls.organization,
        CATALOG_GRPC_URL: urls.catalog,
        RECORDS_GRPC_URL: urls.records,
        METRICS_PORT: "0",
        LOG_LEVEL: "info",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  const listening = new Promise<void>((resolve, reject) => {
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("webhooks listening")) resolve();
    };
    child.stdout!.on("data", read);
    child.stderr!.on("data", read);
    child.once("exit", (code) => reject(new Error(`webhooks exited (${code}): ${output}`)));
  });
  await listening;
  return child;
}

async function kill(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGKILL");
  await exited;
}

describe("the webhooks process killed mid-burst", () => {
  let sys: TestSystem;
  let api: Api;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let child: ChildProcess | undefined;
  const env = () => ({
    WEBHOOK_ALLOWED_TARGETS: `127.0.0.1:${receiver.port}`,
    WEBHOOK_RETRY_SCHEDULE: "1,1,1",
    WEBHOOK_TIMEOUT_MS: "2000",
    WEBHOOK_POLL_MS: "50",
  });

  beforeAll(async () => {
    receiver = await startReceiver();
    sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS, ...env() });
    api = client(sys.baseUrl);
    // The process below takes the in-process service's place, on its port.
    await sys.system.stopService("webhooks");
    child = await startWebhooksProcess(sys, env());
  }, 60_000);

  afterAll(async () => {
    await kill(child);
    await sys?.stop();
    await receiver?.close();
  });

  it(
    "delivers every change of a burst of 1,000 when the process is killed (SIGKILL) in its middle",
    async () => {
      const { tenant, table } = await setUp(sys, api);
      const path = `/killed-${table.tableId}`;
      const { secret } = await createWebhook(api, tenant, table, receiver.url(path));
      await burst(api, tenant, table, 0, BURST / 2);
      await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBeGreaterThan(0);
      // No goodbye: whatever it held (a page being queued, attempts in flight) is left as it was.
      await kill(child);
      expect(delivered(receiver, path, secret).size).toBeLessThan(BURST);
      await burst(api, tenant, table, BURST / 2, BURST / 2);
      child = await startWebhooksProcess(sys, env());
      await expect.poll(() => delivered(receiver, path, secret).size, EVENTUALLY).toBe(BURST);
      expect([...delivered(receiver, path, secret)].sort((a, b) => a - b)).toEqual(
        Array.from({ length: BURST }, (_, i) => i),
      );
    },
    SLOW,
  );
});

describe("NATS down mid-burst", () => {
  let nats: NatsServerProcess;
  let sys: TestSystem;
  let api: Api;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    nats = await startNatsServer();
    receiver = await startReceiver();
    sys = await startTestSystem(
      {
        RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
        WEBHOOK_ALLOWED_TARGETS: `127.0.0.1:${receiver.port}`,
        WEBHOOK_POLL_MS: "50",
      },
      { natsUrl: nats.url },
    );
    api = client(sys.baseUrl);
  });

  afterAll(async () => {
    if (!nats?.running) await nats?.start();
    await sys?.stop();
    await receiver?.close();
    await nats?.close();
  });

  it(
    "delivers every change of a burst of 1,000 written while NATS is down: webhooks follow records, not the bus",
    async () => {
      const { tenant, table } = await setUp(sys, api);
      const path = `/nats-${table.tableId}`;
      const { secret } = await createWebhook(api, tenant, table, receiver.url(path));
      await burst(api, tenant, table, 0, BURST / 2);
      await nats.stop();
      await burst(api, tenant, table, BURST / 2, BURST / 2);
      await expect.poll(() => delivered(receiver, path, secret).size, EVENTUALLY).toBe(BURST);
      await nats.start();
      expect([...delivered(receiver, path, secret)].sort((a, b) => a - b)).toEqual(
        Array.from({ length: BURST }, (_, i) => i),
      );
    },
    SLOW,
  );
});

/**
 * A TCP relay on loopback to `target` (host:port) that can be cut: `down()` drops every
 * connection through it (a query in flight ends with its connection, a transaction with it) and
 * refuses the new ones until `up()`. Only the process pointed at it loses its database; the
 * server and everyone else's connections go on.
 */
async function startCuttableRelay(target: URL) {
  const sockets = new Set<net.Socket>();
  let cut = false;
  const server = net.createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    /** `url` with its host and port replaced by the relay's. */
    through(url: string) {
      const relayed = new URL(url);
      relayed.hostname = "127.0.0.1";
      relayed.port = String(port);
      return relayed.toString();
    },
    down() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    up() {
      cut = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe("PostgreSQL away from the webhooks service mid-burst", () => {
  let sys: TestSystem;
  let api: Api;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let relay: Awaited<ReturnType<typeof startCuttableRelay>>;
  let child: ChildProcess | undefined;
  const env = () => ({
    DATABASE_URL: relay.through(sys.databaseUrl),
    WEBHOOK_ALLOWED_TARGETS: `127.0.0.1:${receiver.port}`,
    WEBHOOK_RETRY_SCHEDULE: "1,1,1",
    WEBHOOK_TIMEOUT_MS: "2000",
    WEBHOOK_POLL_MS: "50",
  });

  beforeAll(async () => {
    receiver = await startReceiver();
    sys = await startTestSystem({
      RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
      WEBHOOK_ALLOWED_TARGETS: `127.0.0.1:${receiver.port}`,
    });
    api = client(sys.baseUrl);
    relay = await startCuttableRelay(new URL(sys.databaseUrl));
    // The process below takes the in-process service's place, on its port, with its database
    // through the relay: only it loses PostgreSQL.
    await sys.system.stopService("webhooks");
    child = await startWebhooksProcess(sys, env());
  }, 60_000);

  afterAll(async () => {
    await kill(child);
    await relay?.close();
    await sys?.stop();
    await receiver?.close();
  });

  it(
    "delivers every one of 1,000 changes, each record's in order, across two database outages",
    async () => {
      const { tenant, table } = await setUp(sys, api);
      const path = `/postgres-${table.tableId}`;
      const { secret } = await createWebhook(api, tenant, table, receiver.url(path));
      const quarter = BURST / 4;
      const rows: number[] = [];
      const create = async (from: number) => {
        const response = await api("POST", v1(table.databaseId, table.tableId).batch, {
          token: tenant.writeToken,
          body: { records: Array.from({ length: quarter }, (_, k) => ({ data: { N: from + k } })) },
        });
        expect(response.status, response.text).toBe(200);
        rows.push(...response.body.data.records.map((record: Payload) => record.row_id));
      };
      /** Each of `rows`, N moved by BURST / 2: a record's second change. */
      const update = async (some: number[]) => {
        const response = await api("PATCH", v1(table.databaseId, table.tableId).batch, {
          token: tenant.writeToken,
          body: {
            records: some.map((rowId) => ({
              row_id: rowId,
              data: { N: rows.indexOf(rowId) + BURST / 2 },
            })),
          },
        });
        expect(response.status, response.text).toBe(200);
      };
      await create(0);
      await create(quarter);
      // Cut while it is following and delivering: its pages, claims and outcomes in flight fail.
      await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBeGreaterThan(0);
      relay.down();
      await update(rows.slice(0, quarter));
      await sleep(3000);
      relay.up();
      const afterFirst = receiver.at(path).length;
      await expect.poll(() => receiver.at(path).length, EVENTUALLY).toBeGreaterThan(afterFirst);
      relay.down();
      await update(rows.slice(quarter, 2 * quarter));
      await sleep(3000);
      relay.up();

      await expect.poll(() => delivered(receiver, path, secret).size, EVENTUALLY).toBe(BURST);
      expect([...delivered(receiver, path, secret)].sort((a, b) => a - b)).toEqual(
        Array.from({ length: BURST }, (_, i) => i),
      );
      // The process rode the outages out: it never exited.
      expect(child!.exitCode).toBeNull();
      expect(child!.signalCode).toBeNull();
      // Each record's creation reached the receiver (every time it did) before its update did.
      const arrivals = new Map<number, string[]>();
      for (const request of receiver.at(path)) {
        const payload = verified(secret, request) as Payload;
        const seen = arrivals.get(payload.row_id) ?? [];
        seen.push(payload.type);
        arrivals.set(payload.row_id, seen);
      }
      expect(arrivals.size).toBe(BURST / 2);
      for (const [rowId, types] of arrivals) {
        const lastCreated = types.lastIndexOf("record.created");
        const firstUpdated = types.indexOf("record.updated");
        expect({ rowId, ordered: lastCreated >= 0 && lastCreated < firstUpdated }).toEqual({
          rowId,
          ordered: true,
        });
      }
    },
    SLOW,
  );
});
