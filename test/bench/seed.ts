import type { JsonObject } from "@bufbuild/protobuf";
import type { MailCatcher } from "@rowbase/kit/testing";
import { runAdminCommand } from "@rowbase/organization/admin";

/** A minimal JSON client for the seeding calls; every non-2xx answer is an error. */
export class Api {
  constructor(readonly baseUrl: string) {}

  async call<T = Record<string, unknown>>(
    method: string,
    path: string,
    options: { token?: string; body?: unknown; query?: Record<string, string | number> } = {},
  ): Promise<T> {
    const url = new URL(path, this.baseUrl);
    for (const [key, value] of Object.entries(options.query ?? {})) {
      url.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = {};
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(url, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: AbortSignal.timeout(120_000),
    });
    const text = await response.text();
    if (!response.ok) {
      throw new Error(
        `${method} ${url.pathname} answered ${response.status}: ${text.slice(0, 500)}`,
      );
    }
    return (JSON.parse(text) as { data: T }).data;
  }
}

/** The table of the benchmark: one field of each of the 8 common types. */
export const FIELDS = [
  { name: "Name", type: "text" },
  { name: "Amount", type: "number", options: { decimals: 2 } },
  { name: "Active", type: "boolean" },
  { name: "Due", type: "date" },
  {
    name: "Status",
    type: "single_select",
    options: { choices: [{ name: "Open" }, { name: "Won" }, { name: "Lost" }] },
  },
  {
    name: "Tags",
    type: "multi_select",
    options: {
      choices: [{ name: "red" }, { name: "green" }, { name: "blue" }, { name: "urgent" }],
    },
  },
  { name: "Notes", type: "long_text" },
  { name: "Seen", type: "datetime" },
] as const;

export type FieldName = (typeof FIELDS)[number]["name"];

/** A small seeded generator (mulberry32), so that every run stores the same records. */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STATUSES = ["Open", "Won", "Lost"];
const TAGS = ["red", "green", "blue", "urgent"];
const DAY_MS = 86_400_000;
const FIRST_DAY = Date.UTC(2024, 0, 1);

/** Record `i` of the benchmark, by field name, as a client would send it. */
export function recordData(i: number, next: () => number): Record<FieldName, unknown> {
  const day = new Date(FIRST_DAY + Math.floor(next() * 1096) * DAY_MS).toISOString().slice(0, 10);
  const seen = new Date(FIRST_DAY + Math.floor(next() * 1096 * DAY_MS)).toISOString();
  return {
    Name: `Customer ${i}`,
    Amount: Math.round(next() * 100_000) / 100,
    Active: next() < 0.5,
    Due: day,
    Status: STATUSES[Math.floor(next() * STATUSES.length)],
    Tags: TAGS.filter(() => next() < 0.3),
    Notes: `Called **Customer ${i}** about order #${1000 + i}. Follow up next week; they asked for the updated price list and a _call back_ before Friday.`,
    Seen: seen,
  };
}

/** A field as `/table/create` answers it. */
export interface ApiField {
  field_id: number;
  name: FieldName;
  type: string;
  options: JsonObject;
  required: boolean;
  description: string;
}

export interface Tenant {
  email: string;
  password: string;
  /** A session access token (JWT) of the owner; it lives 15 minutes, `login` renews it. */
  sessionToken: string;
  organizationId: number;
  /** A read_write API token of the organization. */
  apiToken: string;
  databaseId: number;
  tableId: number;
  /** Field ids by name. */
  fieldIds: Record<FieldName, string>;
  /** The fields as the API answered them (the raw-postgres ceiling compiles queries with them). */
  fields: ApiField[];
  /** The row ids of the seeded records, in creation order. */
  rowIds: number[];
}

export interface SeedOptions {
  records: number;
  /** Signs up a new user through this mail catcher; else `email` and `password` log in. */
  mail?: MailCatcher;
  email?: string;
  password?: string;
  /** An existing organization to use instead of creating one. */
  organizationId?: number;
  /** Puts the organization on `benchPlan`'s plan as an operator (runAdminCommand). */
  admin?: { organizationUrl: string; internalSecret: string };
  say(line: string): void;
}

export async function login(api: Api, email: string, password: string): Promise<string> {
  const data = await api.call<{ access_token: string }>("POST", "/auth/login", {
    body: { email, password },
  });
  return data.access_token;
}

async function signUp(api: Api, mail: MailCatcher) {
  const email = `bench.${Date.now()}.${process.pid}@example.test`;
  const password = "correct horse battery staple";
  const before = mail.messages.length;
  await api.call("POST", "/auth/register", { body: { email, password, name: "Bench" } });
  const message = await mail.next(email, before);
  const code = /code: (\d{6})/.exec(message.subject)?.[1];
  if (!code) throw new Error(`no verification code in "${message.subject}"`);
  const verified = await api.call<{ access_token: string }>("POST", "/auth/verify_email", {
    body: { email, code },
  });
  return { email, password, sessionToken: verified.access_token };
}

/** Records the write scenarios may add to the seeded ones (their guard stops them before). */
const WRITES_ROOM = 500_000;

/**
 * The plan the benchmark's organization is put on: business, whose limits a run stays within,
 * unless the seeded records and the write scenarios' would pass its million records; then
 * enterprise, with business's limits but room for `records` and the writes.
 */
export function benchPlan(records: number): { name: string; args: string[] } {
  if (records + WRITES_ROOM <= 1_000_000) return { name: "business", args: ["business"] };
  const limits = {
    records: records + WRITES_ROOM,
    "api-calls-per-month": 5_000_000,
    "file-storage-bytes": 50 * 2 ** 30,
    "transfer-bytes-per-month": 250 * 2 ** 30,
    members: 30,
    "max-file-bytes": 2 ** 30,
  };
  return {
    name: "enterprise",
    args: [
      "enterprise",
      ...Object.entries(limits).flatMap(([flag, n]) => [`--${flag}`, String(n)]),
    ],
  };
}

/**
 * An organization on `benchPlan`'s plan with an API token, a database, the 8-field table and
 * `records` records created through the batch route, 1000 per call.
 */
export async function seedTenant(api: Api, options: SeedOptions): Promise<Tenant> {
  let account: { email: string; password: string; sessionToken: string };
  if (options.mail) {
    account = await signUp(api, options.mail);
  } else if (options.email && options.password) {
    account = {
      email: options.email,
      password: options.password,
      sessionToken: await login(api, options.email, options.password),
    };
  } else {
    throw new Error("BENCH_EMAIL and BENCH_PASSWORD (a verified user) are needed with BASE_URL");
  }
  const token = account.sessionToken;
  let organizationId = options.organizationId;
  if (organizationId === undefined) {
    const created = await api.call<{ organization: { organization_id: number } }>(
      "POST",
      "/organization/create",
      { token, body: { name: `Bench ${Date.now().toString(36)}` } },
    );
    organizationId = created.organization.organization_id;
  }
  if (options.admin) {
    // Its commit writes the new plan into the shared cache entry (kit plan-cache.ts): the
    // measured requests read it from there as soon as the seed is done.
    await runAdminCommand(
      ["set-plan", String(organizationId), ...benchPlan(options.records).args],
      {
        organizationUrl: options.admin.organizationUrl,
        internalSecret: options.admin.internalSecret,
      },
    );
  } else {
    options.say("  (no ORGANIZATION_GRPC_URL/INTERNAL_JWT_SECRET: the plan is left as it is)");
  }
  const query = { organization_id: organizationId };
  const { token: apiToken } = await api.call<{ token: string }>("POST", "/api_token/create", {
    token,
    query,
    body: { name: `bench ${Date.now().toString(36)}`, access: "read_write" },
  });
  const { database } = await api.call<{ database: { database_id: number } }>(
    "POST",
    "/database/create",
    { token, query, body: { name: `Bench ${Date.now().toString(36)}` } },
  );
  const table = await api.call<{
    table: { table_id: number };
    fields: ApiField[];
  }>("POST", "/table/create", {
    token,
    query: { database_id: database.database_id },
    body: { name: "Customers", fields: FIELDS },
  });
  const fieldIds = Object.fromEntries(
    table.fields.map((field) => [field.name, String(field.field_id)]),
  ) as Record<FieldName, string>;
  const tenant: Tenant = {
    ...account,
    organizationId,
    apiToken,
    databaseId: database.database_id,
    tableId: table.table.table_id,
    fieldIds,
    fields: table.fields,
    rowIds: [],
  };

  const started = Date.now();
  const batch = `${recordsPath(tenant)}/batch`;
  const next = random(42);
  const chunks: Record<string, unknown>[][] = [];
  for (let i = 0; i < options.records; i += 1000) {
    const size = Math.min(1000, options.records - i);
    chunks.push(Array.from({ length: size }, (_, j) => ({ data: recordData(i + j, next) })));
  }
  const ids: number[][] = new Array(chunks.length);
  let nextChunk = 0;
  // A few calls at a time: seeding is not what is measured, it only has to be quick.
  const worker = async () => {
    for (let index = nextChunk++; index < chunks.length; index = nextChunk++) {
      const created = await api.call<{ records: { row_id: number }[] }>("POST", batch, {
        token: apiToken,
        body: { records: chunks[index] },
      });
      ids[index] = created.records.map((record) => record.row_id);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  tenant.rowIds = ids.flat();
  const seconds = (Date.now() - started) / 1000;
  options.say(
    `  seeded ${tenant.rowIds.length} records in ${seconds.toFixed(1)} s (${Math.round(tenant.rowIds.length / seconds)} records/s, 4 calls at a time)`,
  );
  return tenant;
}

/** `/public/v1/databases/{database_id}/tables/{table_id}/records`. */
export function recordsPath(tenant: Pick<Tenant, "databaseId" | "tableId">): string {
  return `/public/v1/databases/${tenant.databaseId}/tables/${tenant.tableId}/records`;
}
