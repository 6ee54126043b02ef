import { runAdminCommand } from "@rowbase/organization/admin";
import { RELAXED_RATE_LIMITS, type TestSystem } from "@rowbase/standalone/testing";
import { expect } from "vitest";
import { type SignedUpUser, signUp } from "./accounts.js";
import type { ApiResponse, client } from "./http.js";
import { createOrg, q } from "./organizations.js";

type Api = ReturnType<typeof client>;

/**
 * Rate limits for record tests that are not about rate limiting: the per-token and per-user
 * record limits (20/s, burst 40 by default) opened wide, on top of the relaxed account limits.
 */
export const RECORD_TEST_RATE_LIMITS = `${RELAXED_RATE_LIMITS},records_token=100000/60,records_user=100000/60,org_write_user=100000/60`;

export const ISO_MILLIS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

export interface Field {
  field_id: number;
  table_id: number;
  name: string;
  type: string;
  options: Record<string, unknown>;
  required: boolean;
}

export interface RecordShape {
  row_id: number;
  table_id: number;
  created_at: string;
  updated_at: string;
  data: Record<string, unknown>;
}

/** An organization with its owner, a read_write and a read API token, and one database. */
export interface Tenant {
  owner: SignedUpUser;
  orgId: number;
  writeToken: string;
  readToken: string;
  databaseId: number;
}

export async function createApiToken(
  api: Api,
  owner: SignedUpUser,
  orgId: number,
  access: "read" | "read_write",
): Promise<string> {
  const response = await api("POST", "/api_token/create", {
    token: owner.token,
    query: q({ organization_id: orgId }),
    body: { name: `${access} ${Math.random().toString(36).slice(2, 8)}`, access },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  const token = response.body.data.token as string;
  expect(token).toMatch(/^rb_[0-9A-Za-z]{40}$/);
  return token;
}

export async function createDatabase(api: Api, token: string, orgId: number): Promise<number> {
  const response = await api("POST", "/database/create", {
    token,
    query: q({ organization_id: orgId }),
    body: { name: `DB ${Math.random().toString(36).slice(2, 8)}` },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data.database.database_id as number;
}

/** Moves an organization to another plan through the operator's admin command. */
export async function setPlan(sys: TestSystem, orgId: number, plan: string, ...flags: string[]) {
  await runAdminCommand(["set-plan", String(orgId), plan, ...flags], {
    organizationUrl: sys.system.grpcUrls.organization,
    internalSecret: sys.internalJwtSecret,
  });
}

export async function createTenant(
  sys: TestSystem,
  api: Api,
  options: { owner?: SignedUpUser; plan?: string } = {},
): Promise<Tenant> {
  const owner = options.owner ?? (await signUp(sys, api));
  const orgId = (await createOrg(api, owner)).organization_id;
  if (options.plan) await setPlan(sys, orgId, options.plan);
  const [writeToken, readToken, databaseId] = await Promise.all([
    createApiToken(api, owner, orgId, "read_write"),
    createApiToken(api, owner, orgId, "read"),
    createDatabase(api, owner.token, orgId),
  ]);
  return { owner, orgId, writeToken, readToken, databaseId };
}

export interface TestTable {
  tableId: number;
  databaseId: number;
  fields: Field[];
  /** Field by name. */
  f: Record<string, Field>;
  /** A field's id as the decimal string that keys `data` in the ids format. */
  id(name: string): string;
}

/** Creates a table with the given fields (FieldCreate bodies) as the tenant's owner. */
export async function createTable(
  api: Api,
  tenant: Tenant,
  fields: Record<string, unknown>[],
  databaseId = tenant.databaseId,
): Promise<TestTable> {
  const response = await api("POST", "/table/create", {
    token: tenant.owner.token,
    query: q({ database_id: databaseId }),
    body: { name: `Table ${Math.random().toString(36).slice(2, 10)}`, fields },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  const created = response.body.data.fields as Field[];
  const byName = Object.fromEntries(created.map((field) => [field.name, field]));
  return {
    tableId: response.body.data.table.table_id,
    databaseId,
    fields: created,
    f: byName,
    id: (name) => {
      const field = byName[name];
      if (!field) throw new Error(`no field ${name}`);
      return String(field.field_id);
    },
  };
}

/** One field of every field type, named after its type. */
export const ALL_TYPES_FIELDS: Record<string, unknown>[] = [
  { name: "Text", type: "text" },
  { name: "Long", type: "long_text" },
  { name: "Number", type: "number", options: { decimals: 2 } },
  { name: "Flag", type: "boolean" },
  { name: "Day", type: "date" },
  { name: "Moment", type: "datetime" },
  {
    name: "Status",
    type: "single_select",
    options: { choices: [{ name: "Active" }, { name: "Lost" }, { name: "New" }] },
  },
  {
    name: "Tags",
    type: "multi_select",
    options: { choices: [{ name: "a" }, { name: "b" }, { name: "c" }, { name: "a,b" }] },
  },
  { name: "Email", type: "email" },
  { name: "Site", type: "url" },
  { name: "Phone", type: "phone" },
  { name: "Meta", type: "json" },
  { name: "Attachment", type: "file" },
  { name: "Serial", type: "autonumber" },
  { name: "Created", type: "created_at" },
  { name: "Updated", type: "updated_at" },
];

/** Paths of the v1 family. */
export function v1(databaseId: number, tableId: number) {
  const table = `/public/v1/databases/${databaseId}/tables/${tableId}`;
  return {
    records: `${table}/records`,
    record: (rowId: number | string) => `${table}/records/${rowId}`,
    batch: `${table}/records/batch`,
    batchDelete: `${table}/records/batch_delete`,
    openapi: `${table}/openapi.json`,
  };
}

/** Creates records through the v1 batch route (in chunks of 1000) and returns them in order. */
export async function seed(
  api: Api,
  token: string,
  table: TestTable,
  rows: Record<string, unknown>[],
): Promise<RecordShape[]> {
  const out: RecordShape[] = [];
  for (let i = 0; i < rows.length; i += 1000) {
    const response = await api("POST", v1(table.databaseId, table.tableId).batch, {
      token,
      body: { records: rows.slice(i, i + 1000).map((data) => ({ data })) },
    });
    expect(response.status, JSON.stringify(response.body).slice(0, 2000)).toBe(200);
    out.push(...(response.body.data.records as RecordShape[]));
  }
  return out;
}

/** Lists with the query-form route (names format unless told); fails the test on a non-200. */
export async function list(
  api: Api,
  token: string,
  table: TestTable,
  query: Record<string, string | number> = {},
): Promise<{ records: RecordShape[]; total: number; limit: number; offset: number }> {
  const response = await api("GET", "/public/record/list", {
    token,
    query: q({
      database_id: table.databaseId,
      table_id: table.tableId,
      response_format: "names",
      limit: 1000,
      ...query,
    }),
  });
  expect(response.status, `${JSON.stringify(query)}: ${JSON.stringify(response.body)}`).toBe(200);
  return response.body.data;
}

/** The 400 `validation_failed` shape, with the given items (matched loosely) in `extra`. */
export function expectValidation(
  response: ApiResponse,
  items: { key: string; source: string; message?: unknown }[],
) {
  expect(response.status, JSON.stringify(response.body)).toBe(400);
  expect(response.body).toEqual({
    status_code: 400,
    detail: expect.any(String),
    extra: expect.arrayContaining(items.map((item) => expect.objectContaining(item))),
  });
}

/** A value for every writable field of ALL_TYPES_FIELDS, by name. */
export const FULL: Record<string, unknown> = {
  Text: "hello",
  Long: "Some **bold** text",
  Number: 3.25,
  Flag: true,
  Day: "2026-01-02",
  Moment: "2026-01-02T03:04:05.000Z",
  Status: "Active",
  Tags: ["a", "c"],
  Email: "ada@example.com",
  Site: "https://example.com/x",
  Phone: "+1 555 0100",
  Meta: { nested: [1, "two", null], ok: true },
};

/** Keys by name to keys by field id. */
export function byIds(t: TestTable, data: Record<string, unknown>) {
  return Object.fromEntries(Object.entries(data).map(([name, value]) => [t.id(name), value]));
}

/** The exact shape of a record, with every field of the table (or `only`) in `data`. */
export function expectRecord(
  record: RecordShape,
  t: TestTable,
  format: "ids" | "names" = "ids",
  only?: string[],
) {
  expect(Object.keys(record).sort()).toEqual([
    "created_at",
    "data",
    "row_id",
    "table_id",
    "updated_at",
  ]);
  expect(Number.isInteger(record.row_id)).toBe(true);
  expect(record.table_id).toBe(t.tableId);
  expect(record.created_at).toMatch(ISO_MILLIS);
  expect(record.updated_at).toMatch(ISO_MILLIS);
  const names = only ?? t.fields.map((field) => field.name);
  const keys = format === "ids" ? names.map((name) => t.id(name)) : names;
  expect(Object.keys(record.data).sort()).toEqual([...keys].sort());
}

/**
 * What a record of an ALL_TYPES_FIELDS table made from `values` holds in every field, by name:
 * null where empty, the autonumber, and the record's own times in the created_at/updated_at fields.
 */
export function allFields(t: TestTable, values: Record<string, unknown>, record: RecordShape) {
  const empty = Object.fromEntries(t.fields.map((field) => [field.name, null]));
  return {
    ...empty,
    ...values,
    Serial: expect.any(Number),
    Created: record.created_at,
    Updated: record.updated_at,
  };
}
