import type { JsonObject } from "@bufbuild/protobuf";
import type autocannon from "autocannon";
import type pg from "pg";
import { linkedScenarios } from "./links.js";
import {
  benchRows,
  benchSchema,
  type ListQuery,
  listStatement,
  type RawWriteTarget,
  rawCreate,
  rawGet,
  rawList,
  rawPatch,
  rawWriteSchema,
  servedFieldIndexes,
} from "./raw-postgres.js";
import { type Api, random, recordData, recordsPath, type Tenant } from "./seed.js";

export interface ScenarioContext {
  tenant: Tenant;
  /** The offset of the deep-page scenario (90,000; 9,000 with --quick). */
  deepOffset: number;
  /** A session token fresh enough for the scenario (renewed by the runner). */
  sessionToken: string;
  /** Where raw writes go; its payloads are sized by the runner from the service's own events. */
  rawTarget: RawWriteTarget;
  /**
   * The benchmark table's valid field indexes, read by a list scenario's check once the builds
   * its first request set off are done, so that the raw statements are the service's.
   */
  indexed: Set<string>;
}

export interface Scenario {
  name: string;
  /** The requests autocannon sends, round-robin per connection. */
  requests(ctx: ScenarioContext): autocannon.Request[];
  /** One operation of the ceiling: the statements the records service sends for one request. */
  raw(ctx: ScenarioContext): (client: pg.PoolClient) => Promise<void>;
  /** Makes what the scenario reads, before anything else (its own tables, say). */
  prepare?(ctx: ScenarioContext, api: Api): Promise<void>;
  /** Checks, before measuring, that the raw statements answer what Rowbase answers. */
  check?(ctx: ScenarioContext, api: Api, pool: pg.Pool): Promise<void>;
  /** Records each request creates (the quota guard and records/s). */
  creates?: number;
  /** The raw operation needs the size of the service's audit events of this action. */
  auditAction?: "record.created" | "record.updated";
}

const json = { "content-type": "application/json" };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const pick = (ids: readonly number[]) => ids[Math.floor(Math.random() * ids.length)]!;

const WHERE = "(Amount,gte,500)~and(Status,eq,Open)";
const SORT = "-Due";

function listQueries(ctx: ScenarioContext) {
  return {
    plain: { limit: 50, offset: 0 },
    where: { limit: 50, offset: 0, where: WHERE, sort: SORT },
    whereUncounted: { limit: 50, offset: 0, where: WHERE, sort: SORT, count: "none" },
    deep: { limit: 50, offset: ctx.deepOffset },
  } satisfies Record<string, ListQuery>;
}

function listScenario(
  name: string,
  which: keyof ReturnType<typeof listQueries>,
  query: (ctx: ScenarioContext) => string,
): Scenario {
  return {
    name,
    requests: (ctx) => [
      {
        method: "GET",
        path: `${recordsPath(ctx.tenant)}?${query(ctx)}`,
        headers: bearer(ctx.tenant.apiToken),
      },
    ],
    raw: (ctx) => {
      const statement = listStatement(
        benchSchema(ctx.tenant),
        listQueries(ctx)[which],
        ctx.indexed,
      );
      return async (client) => {
        await rawList(client, statement);
      };
    },
    async check(ctx, api, pool) {
      const call = () =>
        api.call<{ total?: number | null; records: { row_id: number }[] }>(
          "GET",
          `${recordsPath(ctx.tenant)}?${query(ctx)}`,
          { token: ctx.tenant.apiToken },
        );
      // The first list sets off the field indexes it could use (built in the background, as a
      // table in use has them); the measurement starts once they are there.
      await call();
      ctx.indexed = await servedFieldIndexes(pool, benchSchema(ctx.tenant), 120_000);
      const answer = await call();
      const client = await pool.connect();
      try {
        const raw = await rawList(
          client,
          listStatement(benchSchema(ctx.tenant), listQueries(ctx)[which], ctx.indexed),
        );
        const ids = answer.records.map((record) => record.row_id);
        if ((answer.total ?? null) !== raw.total || ids.join() !== raw.rowIds.join()) {
          throw new Error(
            `${name}: the raw statements disagree with Rowbase (total ${raw.total} vs ${answer.total}, first rows ${raw.rowIds.slice(0, 3)} vs ${ids.slice(0, 3)}): update raw-postgres.ts`,
          );
        }
        if (ids.length !== 50) throw new Error(`${name}: a page of ${ids.length} records, not 50`);
      } finally {
        client.release();
      }
    },
  };
}

/**
 * GET one record. `hot`: always the same one (the auth scenarios, where what differs is the
 * credential, not the row); else a random seeded record.
 */
function getScenario(name: string, token: (ctx: ScenarioContext) => string, hot = false): Scenario {
  const idsOf = (ctx: ScenarioContext) => (hot ? ctx.tenant.rowIds.slice(0, 1) : ctx.tenant.rowIds);
  return {
    name,
    requests: (ctx) => {
      const path = recordsPath(ctx.tenant);
      const ids = idsOf(ctx);
      return [
        {
          method: "GET",
          headers: bearer(token(ctx)),
          setupRequest: (request) => {
            request.path = `${path}/${pick(ids)}`;
            return request;
          },
        },
      ];
    },
    raw: (ctx) => {
      const ids = idsOf(ctx);
      const rows = benchRows(benchSchema(ctx.tenant));
      return (client) => rawGet(client, rows, ctx.tenant.tableId, pick(ids));
    },
    async check(ctx, api, pool) {
      const rowId = pick(idsOf(ctx));
      await api.call("GET", `${recordsPath(ctx.tenant)}/${rowId}`, { token: token(ctx) });
      const client = await pool.connect();
      try {
        await rawGet(client, benchRows(benchSchema(ctx.tenant)), ctx.tenant.tableId, rowId);
      } finally {
        client.release();
      }
    },
  };
}

/** One body per call: the same record each time (creating never dedupes). */
function createBody(count: number, seed: number): { body: string; datas: JsonObject[] } {
  const next = random(seed);
  const records = Array.from({ length: count }, (_, i) => recordData(1_000_000 + i, next));
  const body = JSON.stringify(
    count === 1 ? { data: records[0] } : { records: records.map((data) => ({ data })) },
  );
  return { body, datas: records as JsonObject[] };
}

/** Stored data is keyed by field id; raw inserts store what the service would. */
function byIds(tenant: Tenant, datas: JsonObject[]): JsonObject[] {
  return datas.map((data) =>
    Object.fromEntries(
      Object.entries(data).map(([name, value]) => [
        tenant.fieldIds[name as keyof Tenant["fieldIds"]],
        value,
      ]),
    ),
  );
}

function createScenario(name: string, count: number): Scenario {
  const { body, datas } = createBody(count, 7);
  return {
    name,
    creates: count,
    auditAction: "record.created",
    requests: (ctx) => [
      {
        method: "POST",
        path: count === 1 ? recordsPath(ctx.tenant) : `${recordsPath(ctx.tenant)}/batch`,
        headers: { ...json, ...bearer(ctx.tenant.apiToken) },
        body,
      },
    ],
    raw: (ctx) => {
      const stored = byIds(ctx.tenant, datas);
      const rows = benchRows(rawWriteSchema(benchSchema(ctx.tenant), ctx.rawTarget));
      return (client) => rawCreate(client, ctx.rawTarget, rows, stored);
    },
  };
}

/** A new amount each time: an update that changes nothing writes nothing. */
const newAmount = () => Math.round(Math.random() * 100_000) / 100;

const patchScenario: Scenario = {
  name: "patch one",
  auditAction: "record.updated",
  requests: (ctx) => {
    const path = recordsPath(ctx.tenant);
    const ids = ctx.tenant.rowIds;
    return [
      {
        method: "PATCH",
        headers: { ...json, ...bearer(ctx.tenant.apiToken) },
        setupRequest: (request) => {
          request.path = `${path}/${pick(ids)}`;
          request.body = JSON.stringify({ data: { Amount: newAmount() } });
          return request;
        },
      },
    ];
  },
  raw: (ctx) => {
    const ids = ctx.tenant.rowIds;
    const amount = ctx.tenant.fieldIds.Amount;
    const rows = benchRows(benchSchema(ctx.tenant));
    return (client) =>
      rawPatch(client, ctx.rawTarget, rows, ctx.tenant.tableId, pick(ids), {
        [amount]: newAmount(),
      });
  },
};

/** Every scenario, in the order they run: reads first, then writes (which grow the table). */
export function scenarios(deepOffset: number): Scenario[] {
  return [
    listScenario("list 50", "plain", () => "limit=50"),
    listScenario(
      "list 50 where+sort",
      "where",
      () => `limit=50&where=${encodeURIComponent(WHERE)}&sort=${encodeURIComponent(SORT)}`,
    ),
    listScenario(
      "list 50 where+sort count=none",
      "whereUncounted",
      () =>
        `limit=50&where=${encodeURIComponent(WHERE)}&sort=${encodeURIComponent(SORT)}&count=none`,
    ),
    listScenario(`list 50 at offset ${deepOffset}`, "deep", () => `limit=50&offset=${deepOffset}`),
    ...linkedScenarios(),
    getScenario("get by id", (ctx) => ctx.tenant.apiToken),
    getScenario("auth: api token", (ctx) => ctx.tenant.apiToken, true),
    getScenario("auth: session jwt", (ctx) => ctx.sessionToken, true),
    createScenario("create one", 1),
    patchScenario,
    createScenario("batch create 1000", 1000),
  ];
}

export const WHERE_EXPRESSION = WHERE;
export const SORT_EXPRESSION = SORT;
