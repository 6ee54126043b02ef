import { type RedisServerProcess, startRedisServer } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalSystem, startLocalSystem } from "../bench/local-system.js";
import { Api, random, recordData, recordsPath, seedTenant, type Tenant } from "../bench/seed.js";
import {
  type Answer,
  call,
  loadLoop,
  type Outcome,
  ok,
  tally,
  unavailable,
  until,
} from "./support/http.js";
import { type PrivatePostgres, startPrivatePostgres } from "./support/postgres.js";

/**
 * Issue #10: Rowbase as Kubernetes runs it (each service and the gateway its own process,
 * started by the benchmark's launcher), against a PostgreSQL and a Redis of this test's own, so
 * that they can be killed and restarted without disturbing other tests. The scenarios run in
 * order on one system: Redis down, a service killed (records, then files), a service that
 * hangs, PostgreSQL restarted. Nothing here asserts a speed; only statuses, envelopes and data.
 */

/** The gateway's own deadline on a downstream call (gateway/src/auth/downstream-call.ts). */
const GATEWAY_RPC_TIMEOUT_MS = 10_000;

let postgres: PrivatePostgres;
let redis: RedisServerProcess;
let system: LocalSystem;
let tenant: Tenant;
let session: string;
let docs: { path: string; fieldId: number; rowIds: number[] };
let base: string;

const lines: string[] = [];
const say = (line: string) => {
  lines.push(line);
  if (process.env.FAULT_VERBOSE) process.stderr.write(`${line}\n`);
};

beforeAll(async () => {
  [postgres, redis] = await Promise.all([startPrivatePostgres(), startRedisServer()]);
  system = await startLocalSystem({
    source: true,
    logLevel: "warn",
    say,
    servers: { databaseUrl: postgres.url, redisUrl: redis.url },
    // Login limits on (they must fail closed), record limits high enough not to matter.
    rateLimits:
      "auth_login_ip=1000/60,auth_login_email=1000/60,records_token=100000/60,records_user=100000/60,org_write_user=100000/60",
  });
  base = system.baseUrl;
  const api = new Api(base);
  tenant = await seedTenant(api, {
    records: 100,
    mail: system.mail,
    admin: {
      organizationUrl: system.organizationGrpcUrl,
      internalSecret: system.internalJwtSecret,
    },
    say,
  });
  session = tenant.sessionToken;
  const table = await api.call<{ table: { table_id: number }; fields: { field_id: number }[] }>(
    "POST",
    "/table/create",
    {
      token: session,
      query: { database_id: tenant.databaseId },
      body: { name: "Docs", fields: [{ name: "Doc", type: "file" }] },
    },
  );
  const path = recordsPath({ databaseId: tenant.databaseId, tableId: table.table.table_id });
  const created = await api.call<{ records: { row_id: number }[] }>("POST", `${path}/batch`, {
    token: tenant.apiToken,
    body: { records: Array.from({ length: 5 }, () => ({ data: {} })) },
  });
  docs = {
    path,
    fieldId: table.fields[0]!.field_id,
    rowIds: created.records.map((record) => record.row_id),
  };
}, 300_000);

afterAll(async () => {
  await system?.stop({ keepLogs: Boolean(process.env.FAULT_KEEP_LOGS) });
  if (process.env.FAULT_KEEP_LOGS) process.stderr.write(`logs: ${system?.logsDir}\n`);
  await Promise.all([redis?.stop(), postgres?.close()]);
}, 120_000);

// --- the routes, by the service that answers them ------------------------------------------

const next = random(11);
let serial = 0;
/** Row ids of every create that was acknowledged (2xx), with the name it was given. */
const acknowledged = new Map<number, string>();

const records = {
  list: () => call(base, "GET", `${recordsPath(tenant)}?limit=10`, { token: tenant.apiToken }),
  get: () =>
    call(base, "GET", `${recordsPath(tenant)}/${tenant.rowIds[serial % 50]}`, {
      token: tenant.apiToken,
    }),
  create: async () => {
    const name = `fault ${serial++}`;
    const answer = await call(base, "POST", recordsPath(tenant), {
      token: tenant.apiToken,
      json: { data: { ...recordData(serial, next), Name: name } },
    });
    if (ok(answer)) acknowledged.set(answer.data.record.row_id, name);
    return answer;
  },
};
const identity = { current: () => call(base, "GET", "/auth/current", { token: session }) };
const organization = {
  list: () => call(base, "GET", "/organization/list", { token: session }),
};
const catalog = {
  tables: () =>
    call(base, "GET", `/table/list?database_id=${tenant.databaseId}`, { token: session }),
};
const files = {
  upload: () => {
    const form = new FormData();
    form.append("file", new Blob([Buffer.from(`bytes ${serial++}`)]), "note.txt");
    return call(base, "POST", `/file/upload?row_id=${docs.rowIds[0]}&field_id=${docs.fieldId}`, {
      token: tenant.apiToken,
      form,
    });
  },
  /** A record list of a table with a file field: records asks files for the values. */
  docs: () => call(base, "GET", `${docs.path}?limit=5`, { token: tenant.apiToken }),
};
const login = () =>
  call(base, "POST", "/auth/login", { json: { email: tenant.email, password: tenant.password } });

/** Every acknowledged create is there, with what it was created with. */
async function expectAcknowledgedReadable() {
  const missing: string[] = [];
  for (const [rowId, name] of acknowledged) {
    const answer = await call(
      base,
      "GET",
      `${recordsPath(tenant)}/${rowId}?response_format=names`,
      {
        token: tenant.apiToken,
      },
    );
    if (answer.status !== 200 || answer.data.record.data.Name !== name) {
      missing.push(`${rowId} (${answer.status} ${answer.code} ${answer.data?.record?.data?.Name})`);
    }
  }
  expect(missing, `acknowledged creates not readable: ${missing.join(", ")}`).toEqual([]);
}

function expectOnly(outcomes: Outcome[], routes: string[], accept: (a: Answer) => boolean) {
  const wrong = outcomes.filter((o) => routes.includes(o.route) && !accept(o));
  expect(wrong.length, JSON.stringify(tally(wrong))).toBe(0);
}

type Routes = Record<string, () => Promise<Answer>>;

/** A service to kill, the routes that need it, and routes that must not notice. */
interface KillCase {
  piece: "records" | "files";
  down: Routes;
  up: Routes;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("fault tolerance (one process per service)", () => {
  it("Redis down: logins fail closed with 503, API-token record routes keep working, nothing is 500", async () => {
    await until("login before the outage", login);
    await redis.stop();
    const during = await Promise.all([
      login(),
      records.list(),
      records.get(),
      records.create(),
      files.docs(),
      files.upload(),
      identity.current(),
    ]);
    const [loginAnswer, list, get, create, docsList, upload, current] = during;
    // A store that cannot be reached is 503 service_unavailable; a login limit that
    // cannot be counted refuses (N gateway replicas would each hand out the whole limit).
    expect(loginAnswer).toMatchObject({ status: 503, code: "service_unavailable" });
    // Record and file routes: the API token, the table's owner, the plan come from their
    // services, the limit and the monthly quota count in the gateway's memory.
    for (const answer of [list, get, create, docsList, upload]) {
      expect(answer.status, JSON.stringify(answer)).toBe(200);
    }
    expect(list.data.records.length).toBeGreaterThan(0);
    // A session's revocation marks live only in Redis: a session cannot be checked, so it is
    // refused (fail closed), with 503 rather than 401 or 500.
    expect(current).toMatchObject({ status: 503, code: "service_unavailable" });
    expect(during.filter((answer) => answer.status === 500)).toEqual([]);
    // Some more load while it is down: still no 500 and no failed record call.
    const loop = loadLoop({ list: records.list, get: records.get, create: records.create }, 3);
    await sleep(1500);
    await loop.stop();
    expectOnly(loop.outcomes, ["list", "get", "create"], ok);

    await redis.start();
    await until("login after Redis is back", login);
    await until("a session call after Redis is back", identity.current);
    await expectAcknowledgedReadable();
  }, 60_000);

  it.each<KillCase>([
    {
      piece: "records",
      down: { list: records.list, get: records.get, create: records.create },
      up: {
        current: identity.current,
        organizations: organization.list,
        tables: catalog.tables,
      },
    },
    {
      piece: "files",
      down: { upload: files.upload, docs: files.docs },
      up: {
        list: records.list,
        create: records.create,
        current: identity.current,
        tables: catalog.tables,
      },
    },
  ])(
    "kill -9 $piece under load: only its routes answer 503, it recovers, no acknowledged write is lost",
    async ({ piece, down, up }) => {
      const downRoutes = Object.keys(down);
      const upRoutes = Object.keys(up);
      const loop = loadLoop({ ...down, ...up }, 4);
      await sleep(1000);
      await system.signal(piece, "SIGKILL");
      const killedAt = Date.now();
      // Down: its routes answer 503 service_unavailable.
      for (const [route, probe] of Object.entries(down)) {
        await until(`${route} answers 503 while ${piece} is down`, probe, unavailable);
      }
      await sleep(1500);
      const restartedAt = Date.now();
      await system.restart(piece);
      for (const [route, probe] of Object.entries(down)) {
        await until(`${route} after ${piece} restarted`, probe);
      }
      await sleep(500);
      await loop.stop();

      const outcomes = loop.outcomes;
      // Every other route kept answering, before, during and after.
      expectOnly(outcomes, upRoutes, ok);
      // Its own routes: success, or the 503 envelope while it was away; never a 500.
      expectOnly(outcomes, downRoutes, (answer) => ok(answer) || unavailable(answer));
      const whileDown = outcomes.filter(
        (o) => downRoutes.includes(o.route) && o.at > killedAt + 200 && o.at < restartedAt,
      );
      expect(whileDown.length).toBeGreaterThan(0);
      expect(whileDown.filter(ok), "a route of a dead service answered 2xx").toEqual([]);
      await expectAcknowledgedReadable();
    },
    90_000,
  );

  it("a service that hangs: the service-to-service deadline answers 503 before the gateway's own", async () => {
    await until("docs list before", files.docs);
    // SIGSTOP: the files process keeps its connections open and answers nothing.
    await system.signal("files", "SIGSTOP");
    try {
      const [docsList, upload, list] = await Promise.all([
        files.docs(),
        files.upload(),
        records.list(),
      ]);
      // records -> files ListRecordFiles: records' default deadline (8 s) fires, records
      // answers Unavailable, the gateway 503, all before the gateway's own 10 s deadline.
      expect(docsList).toMatchObject({ status: 503, code: "service_unavailable" });
      expect(docsList.ms).toBeLessThan(GATEWAY_RPC_TIMEOUT_MS);
      // gateway -> files directly: the gateway's deadline, 503, not a hung request.
      expect(upload).toMatchObject({ status: 503, code: "service_unavailable" });
      // A route that does not need files is not held up.
      expect(list.status).toBe(200);
    } finally {
      await system.signal("files", "SIGCONT");
    }
    await until("docs list after files resumed", files.docs);
    await until("upload after files resumed", files.upload);
  }, 60_000);

  it("PostgreSQL restart during writes: 503s not 500s, batches all or nothing, pools reconnect", async () => {
    const batches = new Map<string, "acknowledged" | "unknown">();
    let batchSerial = 0;
    const batch = async () => {
      const tag = `batch ${batchSerial++}`;
      const answer = await call(base, "POST", `${recordsPath(tenant)}/batch`, {
        token: tenant.apiToken,
        json: {
          records: Array.from({ length: 10 }, (_, i) => ({ data: { Name: `${tag} #${i}` } })),
        },
      });
      batches.set(tag, ok(answer) ? "acknowledged" : "unknown");
      return answer;
    };
    const before = await until("count before", () =>
      call(base, "GET", `${recordsPath(tenant)}?limit=1`, { token: tenant.apiToken }),
    );
    const loop = loadLoop(
      {
        create: records.create,
        batch,
        list: records.list,
        current: identity.current,
        tables: catalog.tables,
        organizations: organization.list,
        upload: files.upload,
      },
      4,
    );
    await sleep(1000);
    const stoppedAt = Date.now();
    await postgres.stop();
    await sleep(3000);
    await postgres.start();
    const startedAt = Date.now();
    // Pools reconnect: every service answers from the database again.
    for (const [what, probe] of Object.entries({
      create: records.create,
      batch,
      current: identity.current,
      tables: catalog.tables,
      organizations: organization.list,
      upload: files.upload,
      login,
    })) {
      await until(`${what} after PostgreSQL restarted`, probe, ok, 60_000);
    }
    await sleep(500);
    await loop.stop();

    const outcomes = loop.outcomes;
    // While it was away: the 503 envelope, never a 500 (nor a hung request).
    expectOnly(outcomes, routesOf(outcomes), (answer) => ok(answer) || unavailable(answer));
    const failed = outcomes.filter((o) => !ok(o));
    expect(failed.length, "no request failed while PostgreSQL was down").toBeGreaterThan(0);
    expect(
      failed.every((o) => o.at >= stoppedAt && o.at <= startedAt + 60_000),
      "failures only around the restart",
    ).toBe(true);

    await expectAcknowledgedReadable();
    // A batch is all or nothing: each one's 10 records are all there or none is.
    const names: string[] = [];
    for (let offset = 0; ; offset += 1000) {
      const page = await call(
        base,
        "GET",
        `${recordsPath(tenant)}?limit=1000&offset=${offset}&response_format=names`,
        {
          token: tenant.apiToken,
        },
      );
      expect(page.status).toBe(200);
      const rows = page.data.records as { data: { Name: string } }[];
      names.push(...rows.map((row) => row.data.Name));
      if (rows.length < 1000) break;
    }
    const perBatch = new Map<string, number>();
    for (const name of names) {
      const tag = /^(batch \d+) #/.exec(name ?? "")?.[1];
      if (tag) perBatch.set(tag, (perBatch.get(tag) ?? 0) + 1);
    }
    for (const [tag, state] of batches) {
      const stored = perBatch.get(tag) ?? 0;
      if (state === "acknowledged") expect(stored, tag).toBe(10);
      else expect([0, 10], tag).toContain(stored);
    }
    // Counts match: every acknowledged write is counted; nothing beyond what was attempted.
    const total = names.length;
    const acknowledgedBatches = [...batches.values()].filter((s) => s === "acknowledged").length;
    const attemptedCreates = outcomes.filter((o) => o.route === "create").length;
    expect(total).toBeGreaterThanOrEqual(before.data.total + acknowledgedBatches * 10);
    expect(total).toBeLessThanOrEqual(
      before.data.total + batches.size * 10 + attemptedCreates + 10,
    );
  }, 150_000);
});

function routesOf(outcomes: Outcome[]): string[] {
  return [...new Set(outcomes.map((o) => o.route))];
}
