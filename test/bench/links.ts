import type { JsonObject } from "@bufbuild/protobuf";
import { listQuery, pageStatement, type TableSchema } from "@rowbase/records/statements";
import type autocannon from "autocannon";
import type pg from "pg";
import { rawList } from "./raw-postgres.js";
import type { Scenario, ScenarioContext } from "./scenarios.js";
import { type Api, random, type Tenant } from "./seed.js";

/**
 * The linked-records page: orders, each linked to LINKS_PER_ORDER of LINES lines and rolling
 * up their prices, read 50 at a time with every field ("list 50 links"), and the same page of
 * the same table without the link and the rollup (`fields`: "list 50 links, no link fields"),
 * which a page with them should cost at most 3 times. The two tables are made by the first of
 * the two scenarios through the API, in the benchmark's database, as a client would.
 */

const LINES = 1_000;
const ORDERS = 500;
const LINKS_PER_ORDER = 20;

interface LinkedTable {
  databaseId: number;
  tableId: number;
  schema: TableSchema;
}

export interface LinkedTables {
  orders: LinkedTable;
  lines: LinkedTable;
}

interface CreatedField {
  field_id: number;
  name: string;
  type: string;
  options: JsonObject;
  required: boolean;
  description: string;
}

function schemaOf(
  tenant: Tenant,
  tableId: number,
  name: string,
  fields: CreatedField[],
): TableSchema {
  return {
    tableId: BigInt(tableId),
    databaseId: BigInt(tenant.databaseId),
    organizationId: BigInt(tenant.organizationId),
    name,
    fields: fields.map((field) => ({
      id: String(field.field_id),
      name: field.name,
      type: field.type as TableSchema["fields"][number]["type"],
      options: field.options,
      required: field.required,
      description: field.description,
    })),
  };
}

async function createTable(
  api: Api,
  tenant: Tenant,
  token: string,
  name: string,
  fields: unknown[],
) {
  const created = await api.call<{ table: { table_id: number }; fields: CreatedField[] }>(
    "POST",
    "/table/create",
    { token, query: { database_id: tenant.databaseId }, body: { name, fields } },
  );
  return created.table.table_id;
}

async function fieldsOf(api: Api, token: string, tableId: number): Promise<CreatedField[]> {
  return (
    await api.call<{ fields: CreatedField[] }>("GET", "/field/list", {
      token,
      query: { table_id: tableId },
    })
  ).fields;
}

/** Lines with a name and a price, orders linked to 20 of them each with a rollup of the sum. */
export async function seedLinked(api: Api, tenant: Tenant, token: string): Promise<LinkedTables> {
  const suffix = Date.now().toString(36);
  const linesId = await createTable(api, tenant, token, `Lines ${suffix}`, [
    { name: "Line", type: "text" },
    { name: "Price", type: "number", options: { decimals: 2 } },
  ]);
  const ordersId = await createTable(api, tenant, token, `Orders ${suffix}`, [
    { name: "Order", type: "text" },
    { name: "Note", type: "text" },
  ]);
  const link = await api.call<{ field: CreatedField }>("POST", "/field/create", {
    token,
    query: { table_id: ordersId },
    body: { name: "Lines", type: "link", options: { table_id: linesId } },
  });
  const price = (await fieldsOf(api, token, linesId)).find((f) => f.name === "Price")!;
  await api.call("POST", "/field/create", {
    token,
    query: { table_id: ordersId },
    body: {
      name: "Total",
      type: "rollup",
      options: { link_field_id: link.field.field_id, field_id: price.field_id, function: "sum" },
    },
  });
  const next = random(7);
  const lineIds: number[] = [];
  for (let i = 0; i < LINES; i += 1000) {
    const created = await api.call<{ records: { row_id: number }[] }>(
      "POST",
      `/public/v1/databases/${tenant.databaseId}/tables/${linesId}/records/batch`,
      {
        token: tenant.apiToken,
        body: {
          records: Array.from({ length: Math.min(1000, LINES - i) }, (_, j) => ({
            data: { Line: `Line ${i + j}`, Price: Math.round(next() * 10_000) / 100 },
          })),
        },
      },
    );
    lineIds.push(...created.records.map((r) => r.row_id));
  }
  const pickLines = () => {
    const chosen = new Set<number>();
    while (chosen.size < LINKS_PER_ORDER) chosen.add(lineIds[Math.floor(next() * lineIds.length)]!);
    return [...chosen];
  };
  for (let i = 0; i < ORDERS; i += 250) {
    await api.call(
      "POST",
      `/public/v1/databases/${tenant.databaseId}/tables/${ordersId}/records/batch`,
      {
        token: tenant.apiToken,
        body: {
          records: Array.from({ length: Math.min(250, ORDERS - i) }, (_, j) => ({
            data: { Order: `Order ${i + j}`, Note: "A note", Lines: pickLines() },
          })),
        },
      },
    );
  }
  return {
    orders: {
      databaseId: tenant.databaseId,
      tableId: ordersId,
      schema: schemaOf(tenant, ordersId, "Orders", await fieldsOf(api, token, ordersId)),
    },
    lines: {
      databaseId: tenant.databaseId,
      tableId: linesId,
      schema: schemaOf(tenant, linesId, "Lines", await fieldsOf(api, token, linesId)),
    },
  };
}

/** The two tables, made once by whichever of the two scenarios runs first. */
let made: Promise<LinkedTables> | undefined;

function linkedTables(ctx: ScenarioContext, api: Api): Promise<LinkedTables> {
  made ??= seedLinked(api, ctx.tenant, ctx.sessionToken);
  return made;
}

/** Set by `prepare`: the tables the requests and the raw statements name. */
let tables: LinkedTables | undefined;

function query(withLinks: boolean): string {
  return withLinks ? "limit=50" : "limit=50&fields=Order,Note";
}

function statement(withLinks: boolean) {
  const { orders, lines } = tables!;
  const read = withLinks
    ? orders.schema.fields
    : orders.schema.fields.filter((f) => f.type !== "link" && f.type !== "rollup");
  return pageStatement(
    listQuery(
      orders.schema,
      { limit: 50, offset: 0, where: "", sort: "", count: "exact" },
      "columns",
      new Set(),
      new Map([[String(lines.tableId), lines.schema.fields]]),
      read,
    ),
  );
}

function linkedScenario(name: string, withLinks: boolean): Scenario {
  return {
    name,
    async prepare(ctx, api) {
      tables = await linkedTables(ctx, api);
    },
    requests: (ctx): autocannon.Request[] => [
      {
        method: "GET",
        path: `/public/v1/databases/${tables!.orders.databaseId}/tables/${tables!.orders.tableId}/records?${query(withLinks)}`,
        headers: { authorization: `Bearer ${ctx.tenant.apiToken}` },
      },
    ],
    raw: () => {
      const page = statement(withLinks);
      return async (client: pg.PoolClient) => {
        await rawList(client, page);
      };
    },
    async check(ctx, api, pool) {
      const answer = await api.call<{ total: number; records: { row_id: number }[] }>(
        "GET",
        `/public/v1/databases/${tables!.orders.databaseId}/tables/${tables!.orders.tableId}/records?${query(withLinks)}`,
        { token: ctx.tenant.apiToken },
      );
      const client = await pool.connect();
      try {
        const raw = await rawList(client, statement(withLinks));
        const ids = answer.records.map((record) => record.row_id);
        if (answer.total !== raw.total || ids.join() !== raw.rowIds.join()) {
          throw new Error(`${name}: the raw statements disagree with Rowbase`);
        }
      } finally {
        client.release();
      }
    },
  };
}

export function linkedScenarios(): Scenario[] {
  return [
    linkedScenario("list 50 links", true),
    linkedScenario("list 50 links, no link fields", false),
  ];
}
