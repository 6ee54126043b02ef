import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import formats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newEmail, PASSWORD, type SignedUpUser, signUp } from "./support/accounts.js";
import { filePart, PNG, raw } from "./support/files.js";
import { type ApiResponse, client, type RequestOptions } from "./support/http.js";
import { addMember, createOrg, q } from "./support/organizations.js";
import {
  ALL_TYPES_FIELDS,
  createTable,
  createTenant,
  FULL,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
} from "./support/records.js";

// The published documents checked against what the routes answer: every response below is
// validated against the schema /openapi.json (or the table's own document) gives for its
// route and status, so a client generated from a document can read what the server sends.

type Json = Record<string, unknown>;
interface Document {
  paths: Record<string, Record<string, Json>>;
  components: Json;
}

let sys: TestSystem;
let api: ReturnType<typeof client>;
let document: Document;
const ajv = new Ajv2020({ strict: false, allErrors: true });
// The module is CommonJS: its function is also its own `default`, which is what TS sees.
formats.default(ajv);
/** The operations this file called, `METHOD template`, to check the coverage at the end. */
const called = new Set<string>();

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  const response = await api("GET", "/openapi.json");
  expect(response.status).toBe(200);
  document = response.body;
  ajv.addSchema(document, "api");
}, 60_000);

afterAll(async () => {
  await sys?.stop();
});

/** A JSON pointer into a document, as a URI fragment. */
const pointer = (...segments: string[]) =>
  `#/${segments.map((s) => encodeURIComponent(s.replace(/~/g, "~0").replace(/\//g, "~1"))).join("/")}`;

const compiled = new Map<string, ValidateFunction>();
function validatorAt(documentId: string, segments: string[]): ValidateFunction {
  const key = `${documentId}${pointer(...segments)}`;
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile({ $ref: key });
    compiled.set(key, validate);
  }
  return validate;
}

/**
 * Fails unless the document names this status for the operation and, for a JSON answer, the
 * body fits the schema it gives.
 */
function expectDescribed(
  doc: Document,
  documentId: string,
  method: string,
  template: string,
  response: { status: number; headers: Headers; body: unknown; text?: string },
) {
  const name = `${method} ${template}`;
  const operation = doc.paths[template]?.[method.toLowerCase()];
  expect(operation, `${name} is not documented`).toBeDefined();
  const responses = operation!.responses as Record<string, Json>;
  const status = String(response.status);
  expect(
    Object.keys(responses),
    `${name} answered ${status} (${String(JSON.stringify(response.body)).slice(0, 300)})`,
  ).toContain(status);
  const content = responses[status]!.content as Record<string, Json> | undefined;
  const type = response.headers.get("content-type") ?? "";
  if (!type.startsWith("application/json")) {
    if (content) {
      expect(Object.keys(content), `${name} ${status} content type ${type}`).not.toEqual([
        "application/json",
      ]);
    }
    return;
  }
  expect(content?.["application/json"], `${name} ${status} documents no JSON body`).toBeDefined();
  const validate = validatorAt(documentId, [
    "paths",
    template,
    method.toLowerCase(),
    "responses",
    status,
    "content",
    "application/json",
    "schema",
  ]);
  const ok = validate(response.body);
  expect(
    ok,
    `${name} ${status}: ${JSON.stringify(validate.errors?.filter((e) => e.keyword !== "additionalProperties").slice(0, 5))} in ${JSON.stringify(response.body).slice(0, 600)}`,
  ).toBe(true);
}

/** Calls a route of /openapi.json by its documented path and checks the answer against it. */
async function call(
  method: string,
  template: string,
  options: RequestOptions & { path?: Record<string, string | number> } = {},
): Promise<Answer> {
  const url = template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = options.path?.[name];
    if (value === undefined) throw new Error(`${template}: no value for ${name}`);
    return encodeURIComponent(String(value));
  });
  const response = await api(method, url, options);
  expectDescribed(document, "api", method, template, response);
  called.add(`${method} ${template}`);
  return response;
}

// biome-ignore lint/suspicious/noExplicitAny: tests inspect response bodies freely
type Answer = ApiResponse<any>;

/** Expects a call's status, and shows its body (after `label`) when the status differs. */
async function expectStatus(answer: Promise<Answer>, status: number, label = ""): Promise<void> {
  const { status: got, text } = await answer;
  expect(got, `${label} ${text.slice(0, 300)}`).toBe(status);
}

type CallOptions = RequestOptions & { path?: Record<string, string | number> };
/** A call, `METHOD template options`, and the status it must answer. */
type StatusCase = [method: string, template: string, options: CallOptions, status: number];

/** Makes the calls in order, through `send` (`call` or a table's own), each with its status. */
async function expectStatuses(
  send: (method: string, template: string, options: CallOptions) => Promise<Answer>,
  cases: StatusCase[],
): Promise<void> {
  for (const [method, template, options, status] of cases) {
    await expectStatus(send(method, template, options), status, `${method} ${template}`);
  }
}

/** Expects a call's error code, the envelope's `message`. */
async function expectMessage(answer: Promise<Answer>, message: string): Promise<void> {
  expect((await answer).body.message).toBe(message);
}

const V1 = "/public/v1/databases/{database_id}/tables/{table_id}";

describe("/openapi.json against the routes' answers", () => {
  let owner: SignedUpUser;
  let tenant: Tenant;
  let table: TestTable;

  beforeAll(async () => {
    owner = await signUp(sys, api);
    tenant = await createTenant(sys, api, { owner, plan: "business" });
    table = await createTable(api, tenant, ALL_TYPES_FIELDS);
  }, 60_000);

  it("health", async () => {
    await expectStatus(call("GET", "/health"), 200);
    await expectStatus(call("GET", "/health/ready"), 200);
    // A monitor's cache-buster is ignored there; a credential is not.
    await expectStatus(call("GET", "/health", { query: { ts: "1" } }), 200);
    await expectStatus(call("GET", "/health/ready", { query: { ts: "1" } }), 200);
    await expectStatus(call("GET", "/health", { query: { api_key: "x" } }), 400);
  });

  it("documentation", async () => {
    expect((await call("GET", "/openapi.json")).body.openapi).toBe("3.1.0");
    await expectStatus(call("GET", "/openapi.json", { query: { access_token: "x" } }), 400);
    expect((await call("GET", "/docs")).headers.get("content-type")).toMatch(/^text\/html/);
    const file = await call("GET", "/docs/{file}", { path: { file: "swagger-ui.css" } });
    expect(file.headers.get("content-type")).toMatch(/^text\/css/);
    await expectStatus(call("GET", "/docs/{file}", { path: { file: "nope.js" } }), 404);
    for (const file of ["table-page.js", "table-page.css"]) {
      await expectStatus(call("GET", "/docs/{file}", { path: { file } }), 200);
    }
    const page = await call("GET", "/docs/tables/{table_id}", { path: { table_id: 12 } });
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    await expectStatus(call("GET", "/docs/tables/{table_id}", { path: { table_id: "x" } }), 404);
  });

  it("the MCP endpoint", async () => {
    const accept = { accept: "application/json, text/event-stream" };
    const list = { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} };
    const listed = await call("POST", "/mcp", {
      token: tenant.readToken,
      headers: accept,
      body: list,
    });
    expect(listed.status).toBe(200);
    expect(listed.body.result.tools.length).toBeGreaterThan(0);
    await expectStatuses(call, [
      ["POST", "/mcp", { headers: accept, body: list }, 401],
      [
        "POST",
        "/mcp",
        {
          token: tenant.readToken,
          headers: { ...accept, "content-type": "application/json" },
          rawBody: "{",
        },
        400,
      ],
      [
        "POST",
        "/mcp",
        {
          token: tenant.readToken,
          headers: { ...accept, origin: "https://evil.example" },
          body: list,
        },
        403,
      ],
      ["POST", "/mcp", { token: tenant.readToken, body: list }, 406],
      [
        "POST",
        "/mcp",
        {
          token: tenant.readToken,
          headers: accept,
          body: { jsonrpc: "2.0", method: "notifications/initialized" },
        },
        202,
      ],
    ]);
  });

  it("accounts", async () => {
    const email = newEmail("doc");
    const before = sys.mail.messages.length;
    await expectStatus(
      call("POST", "/auth/register", { body: { email, password: PASSWORD } }),
      200,
    );
    await expectStatus(call("POST", "/auth/register", { body: { email, password: "x" } }), 400);
    await expectStatus(
      call("POST", "/auth/register", { body: { email, password: PASSWORD, x: 1 } }),
      400,
    );
    // More problems than the envelope lists: still the documented shape.
    const many = Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`x${i}`, 1]));
    const capped = await call("POST", "/auth/register", {
      body: { email, password: "x", ...many },
    });
    expect(capped.status).toBe(400);
    expect(capped.body.extra).toHaveLength(100);
    await expectMessage(
      call("POST", "/auth/login", { body: { email, password: PASSWORD } }),
      "email_not_verified",
    );
    await expectStatus(call("POST", "/auth/resend_code", { body: { email } }), 200);
    await expectMessage(
      call("POST", "/auth/verify_email", { body: { email, code: "000000" } }),
      "invalid_verification_code",
    );
    const message = await sys.mail.next(email, before);
    const code = /code: (\d{6})/.exec(message.subject)![1]!;
    const verified = await call("POST", "/auth/verify_email", { body: { email, code } });
    expect(verified.status).toBe(200);
    await expectMessage(
      call("POST", "/auth/register", { body: { email, password: PASSWORD } }),
      "email_already_exists",
    );
    await expectStatus(
      call("POST", "/auth/login", { body: { email, password: "wrong password" } }),
      401,
    );
    const login = await call("POST", "/auth/login", { body: { email, password: PASSWORD } });
    expect(login.status).toBe(200);
    const refreshed = await call("POST", "/auth/refresh", {
      body: { refresh_token: login.body.data.refresh_token },
    });
    expect(refreshed.status).toBe(200);
    await expectStatus(
      call("POST", "/auth/refresh", {
        body: { refresh_token: login.body.data.refresh_token },
      }),
      401,
    );
    await expectStatus(
      call("GET", "/auth/current", { token: verified.body.data.access_token }),
      200,
    );
    await expectStatus(call("GET", "/auth/current"), 401);
    await expectStatus(call("GET", "/auth/current", { query: { access_token: "x" } }), 400);
    await expectStatus(
      call("POST", "/auth/logout", { token: verified.body.data.access_token }),
      200,
    );
    await expectStatus(
      call("POST", "/auth/login", {
        rawBody: "{",
        headers: { "content-type": "application/json" },
      }),
      400,
    );
  });

  it("what the pipeline answers before a route's own work", async () => {
    const bad = { authorization: "Bearer not-a-token" };
    for (const [method, template, options] of [
      [
        "POST",
        "/auth/login",
        { headers: bad, body: { email: "a@b.example", password: "x".repeat(8) } },
      ],
      ["POST", "/auth/register", { headers: bad, body: { email: "x" } }],
      ["GET", "/health", { headers: bad }],
      [
        "POST",
        "/auth/resend_code",
        { rawBody: "email=x", headers: { "content-type": "text/plain" } },
      ],
      ["POST", "/auth/logout", { token: owner.token, body: { x: 1 } }],
      ["GET", "/organization/list", { token: owner.token, query: { page: "1" } }],
      ["GET", "/organization/list", { headers: { authorization: "Basic eDp5" } }],
      ["GET", "/organization/list", { token: tenant.readToken }],
      ["GET", "/public/record/list", { token: owner.token, query: { table_id: "x" } }],
    ] as const) {
      const answer = await call(method, template, options as RequestOptions);
      expect(answer.status, `${method} ${template}`).toBeGreaterThanOrEqual(200);
    }
  });

  it("oauth", async () => {
    // Without a configured provider the redirect answers 503 and the exchange 400
    // idp_auth_error, as any failed exchange (oauth.e2e covers the flow).
    await expectStatus(call("GET", "/oauth/idp"), 503);
    await expectStatus(call("POST", "/oauth/exchange", { body: { code: "x", state: "y" } }), 400);
    await expectStatus(call("POST", "/oauth/exchange", { body: { code: "x" } }), 400);
  });

  it("organizations, members, invites and owner transfer", async () => {
    const token = owner.token;
    const created = await call("POST", "/organization/create", {
      token,
      body: { name: "Doc org" },
    });
    expect(created.status).toBe(200);
    const orgId = created.body.data.organization.organization_id as number;
    const org = q({ organization_id: orgId });
    await expectMessage(
      call("POST", "/organization/create", {
        token,
        body: {
          name: "Again",
          organization_slug: created.body.data.organization.organization_slug,
        },
      }),
      "organization_slug_taken",
    );
    await expectStatus(call("GET", "/organization/get", { token, query: org }), 200);
    await expectStatus(
      call("GET", "/organization/get", { token, query: q({ organization_id: 999999 }) }),
      404,
    );
    await expectStatus(call("GET", "/organization/get", { token }), 400);
    await expectStatus(call("GET", "/organization/list", { token }), 200);
    await expectStatus(
      call("POST", "/organization/update", { token, query: org, body: { name: "Renamed" } }),
      200,
    );
    await expectStatus(call("GET", "/organization/limits", { token, query: org }), 200);
    await expectStatus(call("GET", "/organization/api_stats", { token, query: org }), 200);

    const invitee = await signUp(sys, api);
    const invite = await call("POST", "/organization/invite/create", {
      token,
      query: org,
      body: { email: invitee.email, role: "editor" },
    });
    expect(invite.status).toBe(200);
    await expectMessage(
      call("POST", "/organization/invite/create", {
        token,
        query: org,
        body: { email: invitee.email, role: "editor" },
      }),
      "invite_already_exists",
    );
    await expectStatus(call("GET", "/organization/invite/list", { token, query: org }), 200);
    await expectStatus(call("GET", "/organization/my_invite/list", { token: invitee.token }), 200);
    const inviteId = invite.body.data.invite.invite_id as number;
    const accept = { token: invitee.token, query: q({ invite_id: inviteId }) };
    await expectStatuses(call, [
      ["POST", "/organization/my_invite/accept", accept, 200],
      ["POST", "/organization/my_invite/accept", accept, 404],
    ]);
    const other = await signUp(sys, api);
    const second = await call("POST", "/organization/invite/create", {
      token,
      query: org,
      body: { email: other.email, role: "viewer" },
    });
    await expectStatus(
      call("POST", "/organization/my_invite/decline", {
        token: other.token,
        query: q({ invite_id: second.body.data.invite.invite_id }),
      }),
      200,
    );
    const third = await call("POST", "/organization/invite/create", {
      token,
      query: org,
      body: { email: newEmail("later"), role: "viewer" },
    });
    const cancel = q({ organization_id: orgId, invite_id: third.body.data.invite.invite_id });
    await expectStatus(call("POST", "/organization/invite/cancel", { token, query: cancel }), 200);
    await expectStatus(call("POST", "/organization/invite/cancel", { token, query: cancel }), 404);

    const members = await call("GET", "/organization/member/list", { token, query: org });
    expect(members.status).toBe(200);
    const member = (members.body.data.members as { member_id: number; user_id: number }[]).find(
      (m) => m.user_id === invitee.id,
    )!;
    const memberQuery = q({ organization_id: orgId, member_id: member.member_id });
    for (const [query, role, status] of [
      [memberQuery, "admin", 200],
      [memberQuery, "owner", 400],
      [q({ organization_id: orgId, member_id: 999999 }), "viewer", 404],
    ] as const) {
      await expectStatus(
        call("POST", "/organization/member/update", { token, query, body: { role } }),
        status,
        role,
      );
    }
    await expectStatus(
      call("POST", "/organization/transfer/send_code", {
        token,
        query: org,
        body: { member_id: member.member_id },
      }),
      200,
    );
    await expectMessage(
      call("POST", "/organization/transfer/confirm", {
        token,
        query: org,
        body: { member_id: member.member_id, code: "000000" },
      }),
      "invalid_verification_code",
    );
    await expectStatus(
      call("POST", "/organization/member/update", {
        token: invitee.token,
        query: memberQuery,
        body: { role: "viewer" },
      }),
      403,
    );
    await expectStatus(
      call("POST", "/organization/member/remove", { token, query: memberQuery }),
      200,
    );
    await expectStatus(call("POST", "/organization/delete", { token, query: org }), 200);
    await expectStatus(call("POST", "/organization/delete", { token, query: org }), 404);
  });

  it("owner transfer", async () => {
    const first = await signUp(sys, api);
    const org = q({ organization_id: (await createOrg(api, first)).organization_id });
    const next = await signUp(sys, api);
    const memberId = await addMember(api, first, Number(org.organization_id), next, "admin");
    const before = sys.mail.messages.length;
    await expectStatus(
      call("POST", "/organization/transfer/send_code", {
        token: first.token,
        query: org,
        body: { member_id: memberId },
      }),
      200,
    );
    const mail = await sys.mail.next(first.email, before);
    const code = /(\d{6})/.exec(mail.subject + mail.raw)![1]!;
    const confirmed = await call("POST", "/organization/transfer/confirm", {
      token: first.token,
      query: org,
      body: { member_id: memberId, code },
    });
    expect(confirmed.status).toBe(200);
    await expectMessage(
      call("POST", "/organization/transfer/send_code", {
        token: next.token,
        query: org,
        body: { member_id: memberId },
      }),
      "cannot_transfer_to_self",
    );
  });

  it("API tokens", async () => {
    const token = owner.token;
    const org = q({ organization_id: tenant.orgId });
    const created = await call("POST", "/api_token/create", {
      token,
      query: org,
      body: { name: "doc", access: "read" },
    });
    expect(created.status).toBe(200);
    await expectStatus(
      call("POST", "/api_token/create", {
        token,
        query: org,
        body: { name: "x", access: "all" },
      }),
      400,
    );
    await expectStatus(call("GET", "/api_token/list", { token, query: org }), 200);
    const revoke = q({
      organization_id: tenant.orgId,
      token_id: created.body.data.api_token.token_id,
    });
    await expectStatus(call("POST", "/api_token/revoke", { token, query: revoke }), 200);
    await expectStatus(
      call("POST", "/api_token/revoke", {
        token,
        query: q({ organization_id: tenant.orgId, token_id: 999999 }),
      }),
      404,
    );
    await expectStatus(
      call("GET", "/api_token/list", { token: tenant.writeToken, query: org }),
      401,
    );
  });

  it("databases, tables and fields", async () => {
    const token = owner.token;
    const db = await call("POST", "/database/create", {
      token,
      query: q({ organization_id: tenant.orgId }),
      body: { name: "Doc db", description: "d" },
    });
    expect(db.status).toBe(200);
    const dbq = q({ database_id: db.body.data.database.database_id });
    await expectStatus(call("GET", "/database/get", { token, query: dbq }), 200);
    await expectStatus(
      call("GET", "/database/get", { token, query: q({ database_id: 999999 }) }),
      404,
    );
    await expectStatus(
      call("GET", "/database/list", { token, query: q({ organization_id: tenant.orgId }) }),
      200,
    );
    await expectStatus(
      call("POST", "/database/update", { token, query: dbq, body: { name: "" } }),
      400,
    );
    await expectStatus(
      call("POST", "/database/update", { token, query: dbq, body: { description: "e" } }),
      200,
    );

    const everyType = await call("POST", "/table/create", {
      token,
      query: dbq,
      body: { name: "Every type", fields: ALL_TYPES_FIELDS },
    });
    expect(everyType.status).toBe(200);
    const everyTypeQuery = q({ table_id: everyType.body.data.table.table_id });
    await expectStatus(call("GET", "/field/list", { token, query: everyTypeQuery }), 200);
    const textField = (everyType.body.data.fields as { name: string; field_id: number }[]).find(
      (f) => f.name === "Text",
    )!;
    await api("POST", "/public/record/create", {
      token: tenant.writeToken,
      query: everyTypeQuery,
      body: { data: { Text: "not a number" } },
    });
    await expectMessage(
      call("POST", "/field/update", {
        token,
        query: q({ field_id: textField.field_id }),
        body: { type: "number" },
      }),
      "field_type_change_invalid",
    );
    await expectMessage(
      call("POST", "/database/create", {
        token,
        query: q({ organization_id: tenant.orgId }),
        body: { name: "x".repeat(1024 * 1024) },
      }),
      "payload_too_large",
    );

    // A name as the document's body schema takes it, and as the route does.
    const createBody = validatorAt("api", ["components", "schemas", "DatabaseCreateSchema"]);
    const disagreements: string[] = [];
    for (const name of ["Plain", "  Spaced  ", "   ", "", "a\nb", "x".repeat(101), "\u2028Lead"]) {
      const documented = createBody({ name }) === true;
      const answer = await call("POST", "/database/create", {
        token,
        query: q({ organization_id: tenant.orgId }),
        body: { name },
      });
      if (documented !== (answer.status === 200)) {
        disagreements.push(`${JSON.stringify(name)}: schema ${documented}, route ${answer.status}`);
      }
    }
    expect(disagreements).toEqual([]);

    const t = await call("POST", "/table/create", {
      token,
      query: dbq,
      body: { name: "Doc table", fields: [{ name: "Name", type: "text" }] },
    });
    expect(t.status).toBe(200);
    await expectMessage(
      call("POST", "/table/create", { token, query: dbq, body: { name: "Doc table" } }),
      "table_name_taken",
    );
    const tq = q({ table_id: t.body.data.table.table_id });
    await expectStatus(call("GET", "/table/get", { token, query: tq }), 200);
    await expectStatus(call("GET", "/table/list", { token, query: dbq }), 200);
    await expectStatus(
      call("POST", "/table/update", { token, query: tq, body: { description: "x" } }),
      200,
    );

    const field = await call("POST", "/field/create", {
      token,
      query: tq,
      body: { name: "Amount", type: "number", options: { decimals: 2 } },
    });
    expect(field.status).toBe(200);
    await expectMessage(
      call("POST", "/field/create", {
        token,
        query: tq,
        body: { name: "Bad", type: "number", options: { decimals: 20 } },
      }),
      "invalid_field_options",
    );
    await expectMessage(
      call("POST", "/field/create", {
        token,
        query: tq,
        body: { name: "amount", type: "text" },
      }),
      "field_name_taken",
    );
    await expectStatus(call("GET", "/field/list", { token, query: tq }), 200);
    const fq = q({ field_id: field.body.data.field.field_id });
    await expectStatus(
      call("POST", "/field/update", { token, query: fq, body: { position: 0 } }),
      200,
    );
    await expectStatus(call("POST", "/field/delete", { token, query: fq }), 200);
    await expectStatus(call("POST", "/field/delete", { token, query: fq }), 404);
    await expectStatus(call("POST", "/table/delete", { token, query: tq }), 200);
    await expectStatus(call("GET", "/table/get", { token, query: tq }), 404);
    await expectStatus(call("POST", "/database/delete", { token, query: dbq }), 200);
  });

  it("records, both families", async () => {
    const path = { database_id: tenant.databaseId, table_id: table.tableId };
    const write = tenant.writeToken;
    const read = tenant.readToken;
    const created = await call("POST", `${V1}/records`, {
      token: write,
      path,
      body: { data: FULL },
    });
    expect(created.status).toBe(200);
    const rowId = created.body.data.record.row_id as number;
    const row = { ...path, row_id: rowId };
    await expectStatuses(call, [
      ["POST", `${V1}/records`, { token: write, path, body: { data: { Number: "x" } } }, 400],
      ["POST", `${V1}/records`, { token: read, path, body: { data: {} } }, 403],
      ["POST", `${V1}/records`, { path, body: { data: {} } }, 401],
    ]);
    for (const format of ["ids", "names"]) {
      const query = { response_format: format, rich_text: "html" };
      await expectStatus(
        call("GET", `${V1}/records/{row_id}`, { token: read, path: row, query }),
        200,
      );
      const listed = await call("GET", `${V1}/records`, {
        token: read,
        path,
        query: {
          ...query,
          where: "(Flag,checked)~and(Number,gte,1)",
          sort: "-Number,Text",
          limit: "10",
        },
      });
      expect(listed.status).toBe(200);
      expect(listed.body.data.records.length).toBeGreaterThan(0);
      const only = await call("GET", `${V1}/records`, {
        token: read,
        path,
        query: { ...query, fields: "Text,Tags" },
      });
      expect(only.status).toBe(200);
    }
    await expectStatuses(call, [
      ["GET", `${V1}/records`, { token: read, path, query: { where: "(Text,eqq,x)" } }, 400],
      ["GET", `${V1}/records/{row_id}`, { token: read, path: { ...path, row_id: 999999 } }, 404],
      ["GET", `${V1}/records`, { token: read, path: { ...path, table_id: 999999 } }, 404],
      [
        "PATCH",
        `${V1}/records/{row_id}`,
        { token: write, path: row, body: { data: { Text: "changed" } } },
        200,
      ],
    ]);
    const batch = await call("POST", `${V1}/records/batch`, {
      token: write,
      path,
      body: { records: [{ data: FULL }, { data: { Text: "b" } }] },
    });
    expect(batch.status).toBe(200);
    const ids = (batch.body.data.records as { row_id: number }[]).map((r) => r.row_id);
    await expectStatuses(call, [
      ["POST", `${V1}/records/batch`, { token: write, path, body: { records: [] } }, 400],
      [
        "PATCH",
        `${V1}/records/batch`,
        {
          token: write,
          path,
          body: { records: ids.map((id) => ({ row_id: id, data: { Number: 7 } })) },
        },
        200,
      ],
      [
        "PATCH",
        `${V1}/records/batch`,
        { token: write, path, body: { records: [{ row_id: 999999, data: { Number: 7 } }] } },
        404,
      ],
      [
        "POST",
        `${V1}/records/batch_delete`,
        { token: write, path, body: { row_ids: [ids[1]] } },
        200,
      ],
      ["GET", `${V1}/openapi.json`, { token: read, path }, 200],
      ["GET", `${V1}/changes`, { token: read, path, query: { types: "record.deleted" } }, 200],
      ["GET", `${V1}/changes`, { token: read, path, query: { after: "nope" } }, 400],
      // An open stream never ends, so only its refusal is read whole here; the stream itself is
      // exercised in record-changes.e2e.test.ts.
      ["GET", `${V1}/changes/stream`, { token: read, path, query: { after: "nope" } }, 400],
    ]);

    const tq = { table_id: String(table.tableId) };
    const qc = await call("POST", "/public/record/create", {
      token: write,
      query: tq,
      body: { data: { Text: "q" } },
    });
    expect(qc.status).toBe(200);
    const qrow = { ...tq, row_id: String(qc.body.data.record.row_id) };
    await expectStatuses(call, [
      ["GET", "/public/record/get", { token: read, query: qrow }, 200],
      ["GET", "/public/record/get", { token: read, query: { ...tq, row_id: "999999" } }, 404],
      [
        "GET",
        "/public/record/list",
        {
          token: read,
          query: { ...tq, database_id: String(tenant.databaseId), sort: "row_id", fields: "Text" },
        },
        200,
      ],
      [
        "PUT",
        "/public/record/update",
        { token: write, query: qrow, body: { data: { Text: "qq" } } },
        200,
      ],
      ["POST", "/public/record/delete", { token: write, query: qrow }, 200],
      ["DELETE", "/public/record/delete", { token: write, query: qrow }, 404],
      ["DELETE", `${V1}/records/{row_id}`, { token: write, path: row }, 200],
    ]);
  });

  it("files", async () => {
    const ft = await createTable(api, tenant, [
      { name: "Doc", type: "file" },
      { name: "Title", type: "text" },
    ]);
    const rec = await api(
      "POST",
      `/public/v1/databases/${ft.databaseId}/tables/${ft.tableId}/records`,
      {
        token: tenant.writeToken,
        body: { data: { Title: "t" } },
      },
    );
    const pairQuery = q({ row_id: rec.body.data.record.row_id, field_id: ft.f.Doc!.field_id });
    const write = tenant.writeToken;
    await expectStatus(
      call("POST", "/file/storage_check", {
        token: write,
        query: q({ row_id: rec.body.data.record.row_id, file_size: 10 }),
      }),
      200,
    );
    await expectStatus(
      call("POST", "/file/storage_check", {
        token: write,
        query: q({ row_id: rec.body.data.record.row_id, file_size: 10 ** 12 }),
      }),
      413,
    );
    const upload = await raw(
      sys.baseUrl,
      "POST",
      `/file/upload?${new URLSearchParams(pairQuery)}`,
      {
        token: write,
        body: filePart(PNG, "pixel.png"),
      },
    );
    expectDescribed(document, "api", "POST", "/file/upload", {
      ...upload,
      body: upload.json,
    });
    called.add("POST /file/upload");
    expect(upload.status).toBe(200);
    const served = await raw(sys.baseUrl, "GET", `/file/serve?${new URLSearchParams(pairQuery)}`, {
      token: tenant.readToken,
    });
    expect(served.status).toBe(200);
    expectDescribed(document, "api", "GET", "/file/serve", { ...served, body: undefined });
    for (const [headers, status] of [
      [{ range: "bytes=0-3" }, 206],
      [{ range: `bytes=${PNG.length}-` }, 416],
      [{ "if-none-match": served.headers.get("etag")! }, 304],
    ] as const) {
      const answer = await raw(
        sys.baseUrl,
        "GET",
        `/file/serve?${new URLSearchParams(pairQuery)}`,
        {
          token: tenant.readToken,
          headers,
        },
      );
      expect(answer.status).toBe(status);
      expectDescribed(document, "api", "GET", "/file/serve", { ...answer, body: answer.json });
    }
    called.add("GET /file/serve");
    const url = await call("GET", "/file/url", { token: tenant.readToken, query: pairQuery });
    expect(url.status).toBe(200);
    const signedPath = new URL(url.body.data.url).pathname;
    const signed = await raw(sys.baseUrl, "GET", signedPath);
    expect(signed.status).toBe(200);
    expectDescribed(document, "api", "GET", "/file/signed/{token}", { ...signed, body: undefined });
    called.add("GET /file/signed/{token}");
    const badSigned = await call("GET", "/file/signed/{token}", { path: { token: "nope" } });
    expect(badSigned.status).toBeGreaterThanOrEqual(400);
    await expectStatus(
      call("POST", "/file/rename", {
        token: write,
        query: pairQuery,
        body: { file_name: "renamed.png" },
      }),
      200,
    );
    await expectStatus(
      call("POST", "/file/rename", {
        token: write,
        query: pairQuery,
        body: { file_name: "a/b" },
      }),
      400,
    );
    const renameBody = validatorAt("api", [
      "paths",
      "/file/rename",
      "post",
      "requestBody",
      "content",
      "application/json",
      "schema",
    ]);
    const disagreements: string[] = [];
    for (const file_name of [
      "ok.png",
      " spaced.png ",
      "...",
      "a/b",
      "a\\b",
      "..",
      " . ",
      "  ",
      "a\u202eb",
    ]) {
      const documented = renameBody({ file_name }) === true;
      const answer = await call("POST", "/file/rename", {
        token: write,
        query: pairQuery,
        body: { file_name },
      });
      if (documented !== (answer.status === 200)) {
        disagreements.push(
          `${JSON.stringify(file_name)}: schema ${documented}, route ${answer.status}`,
        );
      }
    }
    expect(disagreements).toEqual([]);
    await expectStatus(call("POST", "/file/delete", { token: write, query: pairQuery }), 200);
    await expectStatus(call("POST", "/file/restore", { token: write, query: pairQuery }), 200);
    await expectStatus(
      call("POST", "/file/delete", {
        token: write,
        query: q({ row_id: 999999, field_id: ft.f.Doc!.field_id }),
      }),
      404,
    );
    await expectMessage(
      call("GET", "/file/url", {
        token: tenant.readToken,
        query: q({ row_id: rec.body.data.record.row_id, field_id: ft.f.Title!.field_id }),
      }),
      "field_not_file_type",
    );
    await expectStatus(
      call("POST", "/file/delete", { token: tenant.readToken, query: pairQuery }),
      403,
    );
  });

  it("the not-found and forbidden answers of each family", async () => {
    const token = owner.token;
    const viewer = await signUp(sys, api);
    await addMember(api, owner, tenant.orgId, viewer, "viewer");
    const stranger = await signUp(sys, api);
    const missing = 999_999;
    const org = q({ organization_id: tenant.orgId });
    const cases: [string, string, RequestOptions & { path?: Record<string, number> }][] = [
      ["GET", "/organization/limits", { token: stranger.token, query: org }],
      ["POST", "/organization/member/remove", { token, query: q({ ...org, member_id: missing }) }],
      [
        "POST",
        "/organization/invite/create",
        { token: viewer.token, query: org, body: { email: newEmail(), role: "viewer" } },
      ],
      [
        "POST",
        "/api_token/create",
        { token: viewer.token, query: org, body: { name: "n", access: "read" } },
      ],
      ["POST", "/database/create", { token: viewer.token, query: org, body: { name: "n" } }],
      ["GET", "/database/list", { token: stranger.token, query: org }],
      ["GET", "/table/list", { token, query: q({ database_id: missing }) }],
      [
        "POST",
        "/table/create",
        { token: viewer.token, query: q({ database_id: tenant.databaseId }), body: { name: "n" } },
      ],
      ["GET", "/field/list", { token, query: q({ table_id: missing }) }],
      ["POST", "/field/update", { token, query: q({ field_id: missing }), body: { name: "n" } }],
      [
        "GET",
        `${V1}/records`,
        { token: tenant.readToken, path: { database_id: missing, table_id: table.tableId } },
      ],
      [
        "GET",
        "/public/record/list",
        { token: tenant.readToken, query: q({ database_id: missing, table_id: table.tableId }) },
      ],
      [
        "POST",
        "/public/record/create",
        { token: viewer.token, query: q({ table_id: table.tableId }), body: { data: {} } },
      ],
      [
        "GET",
        "/public/record/get",
        { token: stranger.token, query: q({ table_id: table.tableId, row_id: 1 }) },
      ],
      [
        "GET",
        "/file/url",
        {
          token: tenant.readToken,
          query: q({ row_id: missing, field_id: table.f.Attachment!.field_id }),
        },
      ],
      ["GET", "/file/url", { token: tenant.readToken, query: q({ row_id: 1, field_id: missing }) }],
      [
        "POST",
        "/file/rename",
        {
          token: tenant.writeToken,
          query: q({ row_id: 0, field_id: 0 }),
          body: { file_name: "x" },
        },
      ],
      ["GET", "/audit/list", { token: stranger.token, query: org }],
      ["GET", "/audit/list", { token, query: q({ table_id: missing }) }],
    ];
    for (const [method, template, options] of cases) {
      const answer = await call(method, template, options);
      expect([403, 404], `${method} ${template}: ${answer.text}`).toContain(answer.status);
    }
  });

  it("takes the query values its parameter schemas take and refuses the others", async () => {
    const org = { organization_id: String(tenant.orgId) };
    const found: string[] = [];
    for (const [template, name, value] of [
      ["/audit/list", "since", "2026-01-01"],
      ["/audit/list", "since", "2026-01-01T00:00:00+02:00"],
      ["/audit/list", "action", "record.created"],
      ["/audit/list", "action", ""],
      ["/audit/list", "action", "nonsense"],
      ["/audit/list", "action", "Record.Created"],
      ["/audit/list", "limit", "0"],
      ["/organization/api_stats", "from", "2026-02-30"],
      ["/organization/api_stats", "from", "2026-11-01"],
    ] as const) {
      const parameters = document.paths[template]!.get!.parameters as {
        name: string;
        schema: Json;
      }[];
      const index = parameters.findIndex((parameter) => parameter.name === name);
      const validate = validatorAt("api", [
        "paths",
        template,
        "get",
        "parameters",
        String(index),
        "schema",
      ]);
      // A query value is text; a number's schema reads it as the number it spells.
      const typed = parameters[index]!.schema.type === "integer" ? Number(value) : value;
      const documented = validate(typed) === true;
      const answer = await call("GET", template, {
        token: owner.token,
        query: { ...org, [name]: value },
      });
      if (documented !== (answer.status === 200)) {
        found.push(`${template} ${name}=${value}: schema ${documented}, route ${answer.status}`);
      }
    }
    expect(found).toEqual([]);
  });

  it("forms", async () => {
    const token = owner.token;
    const created = await call("POST", "/form/create", {
      token,
      query: q({ table_id: table.tableId }),
      body: { name: "Contact", fields: [table.fields[0]!.field_id], success_message: "Thanks" },
    });
    expect(created.status, created.text).toBe(200);
    const formId = created.body.data.form.form_id as number;
    await expectStatuses(call, [
      ["GET", "/form/get", { token, query: q({ form_id: formId }) }, 200],
      ["GET", "/form/list", { token, query: q({ table_id: table.tableId }) }, 200],
      [
        "POST",
        "/form/update",
        { token, query: q({ form_id: formId }), body: { active: false } },
        200,
      ],
      [
        "POST",
        "/form/create",
        { token, query: q({ table_id: table.tableId }), body: { name: "X", fields: [] } },
        400,
      ],
      ["GET", "/form/get", { token, query: q({ form_id: 999999999 }) }, 404],
    ]);
    const key = created.body.data.form.form_key as string;
    await api("POST", "/form/update", {
      token,
      query: q({ form_id: formId }),
      body: { active: true },
    });
    const path = { form_key: key };
    await expectStatuses(call, [
      ["GET", "/forms/{form_key}/schema", { path }, 200],
      ["POST", "/forms/{form_key}/submit", { path, body: { data: {} } }, 200],
      ["POST", "/forms/{form_key}/submit", { path, body: { data: { Nope: 1 } } }, 400],
      ["GET", "/forms/{form_key}/schema", { path: { form_key: "unknown" } }, 404],
    ]);
    // The page is HTML, not JSON.
    const page = await api("GET", `/forms/${key}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    called.add("GET /forms/{form_key}");
    await expectStatuses(call, [
      ["POST", "/form/delete", { token, query: q({ form_id: formId }) }, 200],
    ]);
  });

  it("audit", async () => {
    const token = owner.token;
    await expectStatus(
      call("GET", "/audit/list", { token, query: q({ organization_id: tenant.orgId }) }),
      200,
    );
    await expectStatus(
      call("GET", "/audit/list", {
        token,
        query: q({ table_id: table.tableId, limit: 5, action: "record.created" }),
      }),
      200,
    );
    await expectStatus(
      call("GET", "/audit/list", {
        token,
        query: q({ organization_id: tenant.orgId, database_id: tenant.databaseId }),
      }),
      400,
    );
    await expectStatus(
      call("GET", "/audit/list", { token, query: q({ database_id: 999999 }) }),
      404,
    );
  });

  it("webhooks", async () => {
    const token = owner.token;
    const onTable = q({ table_id: table.tableId });
    const created = await call("POST", "/webhook/create", {
      token,
      query: onTable,
      // A name on loopback: taken at create, refused when an attempt connects, so that
      // nothing leaves the machine.
      body: { url: "http://localhost:1/doc", events: ["record.created"] },
    });
    expect(created.status, created.text).toBe(200);
    const one = q({ webhook_id: created.body.data.webhook.webhook_id });
    const tested = await call("POST", "/webhook/test", { token, query: one });
    expect(tested.status, tested.text).toBe(200);
    expect(tested.body.data.delivery.error).toBe("address_forbidden");
    const delivery = q({ delivery_id: tested.body.data.delivery.delivery_id });
    await expectStatuses(call, [
      ["POST", "/webhook/create", { token, query: onTable, body: { url: "ftp://x" } }, 400],
      [
        "POST",
        "/webhook/create",
        { token, query: onTable, body: { url: "http://10.0.0.1/x" } },
        400,
      ],
      ["GET", "/webhook/list", { token, query: onTable }, 200],
      ["GET", "/webhook/list", { token, query: q({ table_id: 999999 }) }, 404],
      ["GET", "/webhook/get", { token, query: one }, 200],
      ["POST", "/webhook/update", { token, query: one, body: { where: "(Text,eq,x)" } }, 200],
      ["POST", "/webhook/update", { token, query: one, body: { events: [] } }, 400],
      ["POST", "/webhook/rotate_secret", { token, query: one }, 200],
      ["GET", "/webhook/deliveries", { token, query: { ...one, status: "failed" } }, 200],
      ["GET", "/webhook/deliveries", { token, query: { ...one, limit: "0" } }, 400],
      ["POST", "/webhook/redeliver", { token, query: delivery }, 200],
      ["POST", "/webhook/redeliver", { token, query: q({ delivery_id: 999999 }) }, 404],
      ["POST", "/webhook/test", { token, query: q({ webhook_id: 999999 }) }, 404],
      ["POST", "/webhook/delete", { token, query: one }, 200],
      ["GET", "/webhook/get", { token, query: one }, 404],
      ["GET", "/webhook/list", { token: tenant.readToken, query: onTable }, 401],
    ]);
  });

  it("called every documented operation", () => {
    const documented = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.keys(item)
        .filter((key) => ["get", "post", "put", "patch", "delete"].includes(key))
        .map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(documented.filter((name) => !called.has(name))).toEqual([]);
  });
});

describe("a table's own OpenAPI document against its record routes", () => {
  let tenant: Tenant;
  let table: TestTable;
  let doc: Document;
  /** The document of `response_format=names`: reads and request bodies keyed by field name. */
  let named: Document;
  let path: { database_id: number; table_id: number };

  beforeAll(async () => {
    tenant = await createTenant(sys, api, { plan: "business" });
    table = await createTable(api, tenant, [
      { ...ALL_TYPES_FIELDS[0], required: true },
      ...ALL_TYPES_FIELDS.slice(1),
      // A name of digits only is read as an id: such a field is written by its id.
      { name: "2024", type: "text" },
    ]);
    path = { database_id: tenant.databaseId, table_id: table.tableId };
    const response = await call("GET", `${V1}/openapi.json`, { token: tenant.readToken, path });
    expect(response.status).toBe(200);
    doc = response.body as Document;
    ajv.addSchema(doc, "table");
    const byNames = await call("GET", `${V1}/openapi.json`, {
      token: tenant.readToken,
      path,
      query: { response_format: "names" },
    });
    named = byNames.body as Document;
    ajv.addSchema(named, "named");
  }, 60_000);

  /**
   * Calls a route by its path in the table's document and checks the answer against it: the
   * names document when the call reads with `response_format=names`.
   */
  async function callTable(
    method: string,
    template: string,
    options: RequestOptions & { path?: Record<string, string | number> } = {},
  ): Promise<Answer> {
    const url = template.replace(/\{(\w+)\}/g, (_, name: string) =>
      encodeURIComponent(String({ ...path, ...options.path }[name])),
    );
    const response = await api(method, url, options);
    const byNames = options.query?.response_format === "names";
    expectDescribed(byNames ? named : doc, byNames ? "named" : "table", method, template, response);
    return response;
  }

  it("is a valid OpenAPI 3.1 document, in both forms", async () => {
    for (const document of [doc, named]) {
      const result = await new Validator().validate(structuredClone(document) as never);
      expect(result.errors).toBeUndefined();
      expect(result.valid).toBe(true);
    }
  });

  it("describes what the record routes answer", async () => {
    const write = tenant.writeToken;
    const read = tenant.readToken;
    const created = await callTable("POST", `${V1}/records`, {
      token: write,
      body: { data: FULL },
    });
    expect(created.status).toBe(200);
    const row = { row_id: created.body.data.record.row_id as number };
    const batch = await callTable("POST", `${V1}/records/batch`, {
      token: write,
      body: { records: [{ data: { Text: "b" } }, { data: { ...FULL, Tags: [] } }] },
    });
    expect(batch.status).toBe(200);
    for (const format of ["ids", "names"]) {
      for (const rich of ["markdown", "html", "plain"]) {
        const query = { response_format: format, rich_text: rich };
        await expectStatus(
          callTable("GET", `${V1}/records/{row_id}`, { token: read, path: row, query }),
          200,
        );
        const listed = await callTable("GET", `${V1}/records`, {
          token: read,
          query: { ...query, sort: "-Day,Text", where: "(Text,notblank)" },
        });
        expect(listed.body.data.records.length).toBe(3);
        await expectStatus(
          callTable("GET", `${V1}/records`, {
            token: read,
            query: { ...query, fields: "Tags,Meta" },
          }),
          200,
        );
      }
    }
    const ids = (batch.body.data.records as { row_id: number }[]).map((r) => r.row_id);
    await expectStatus(
      callTable("PATCH", `${V1}/records/batch`, {
        token: write,
        body: { records: ids.map((id) => ({ row_id: id, data: { Number: "4.5" } })) },
      }),
      200,
    );
    await expectStatus(
      callTable("PATCH", `${V1}/records/{row_id}`, {
        token: write,
        path: row,
        body: { data: { Text: "again" } },
      }),
      200,
    );
    const tq = { table_id: String(table.tableId) };
    const qrow = { ...tq, row_id: String(row.row_id) };
    await expectStatus(callTable("GET", "/public/record/get", { token: read, query: qrow }), 200);
    await expectStatus(
      callTable("GET", "/public/record/list", {
        token: read,
        query: { ...tq, database_id: String(tenant.databaseId), response_format: "names" },
      }),
      200,
    );
    await expectStatus(
      callTable("POST", "/public/record/create", {
        token: write,
        query: tq,
        body: { data: { Text: "q" } },
      }),
      200,
    );
    await expectStatus(
      callTable("PUT", "/public/record/update", {
        token: write,
        query: qrow,
        body: { data: { Flag: false } },
      }),
      200,
    );
    // The errors each documents, in order: what was deleted is not found again.
    await expectStatuses(callTable, [
      ["GET", `${V1}/records/{row_id}`, { token: read, path: { row_id: 999999 } }, 404],
      ["GET", `${V1}/records`, { query: {} }, 401],
      ["GET", `${V1}/records`, { token: read, query: { limit: "0" } }, 400],
      ["POST", `${V1}/records`, { token: read, body: { data: { Text: "x" } } }, 403],
      ["POST", `${V1}/records`, { token: write, body: { data: { Nope: 1 } } }, 400],
      [
        "POST",
        `${V1}/records`,
        { token: write, rawBody: "{", headers: { "content-type": "application/json" } },
        400,
      ],
      ["POST", `${V1}/records/batch_delete`, { token: write, body: { row_ids: [ids[0]] } }, 200],
      ["POST", `${V1}/records/batch_delete`, { token: write, body: { row_ids: [ids[0]] } }, 404],
      ["DELETE", `${V1}/records/{row_id}`, { token: write, path: row }, 200],
      ["DELETE", "/public/record/delete", { token: write, query: qrow }, 404],
      ["GET", `${V1}/openapi.json`, { token: read }, 200],
    ]);
    // Rendered as HTML, a long text at its stored limit comes out longer than the limit.
    const longest = await callTable("POST", `${V1}/records`, {
      token: write,
      body: { data: { Text: "long", Long: "*a* ".repeat(25_000) } },
    });
    expect(longest.status).toBe(200);
    for (const rich of ["markdown", "html", "plain"]) {
      const answer = await callTable("GET", `${V1}/records/{row_id}`, {
        token: read,
        path: { row_id: longest.body.data.record.row_id },
        query: { rich_text: rich, response_format: "names" },
      });
      expect(answer.status).toBe(200);
    }
    const tooLarge = await callTable("POST", `${V1}/records`, {
      token: write,
      body: { data: { Text: "x".repeat(1024 * 1024) } },
    });
    expect(tooLarge.body).toEqual({ message: "payload_too_large", data: {} });
  });

  it("has the operations, parameters and statuses /openapi.json gives the same routes", () => {
    // What an error answer may be: the component it refers to, or its `message` codes.
    const answersOf = (response: Json): string => {
      const codes = (schema: Json | undefined): string[] => {
        if (!schema) return [];
        if (Array.isArray(schema.oneOf)) return (schema.oneOf as Json[]).flatMap(codes);
        if (typeof schema.$ref === "string") return [schema.$ref.split("/").at(-1)!];
        const message = (schema.properties as Record<string, Json> | undefined)?.message;
        return message ? ((message.enum as string[]) ?? [message.const as string]) : [];
      };
      const content = response.content as Record<string, Json> | undefined;
      return codes(content?.["application/json"]?.schema as Json | undefined)
        .sort()
        .join(",");
    };
    // What a value must be; the table's own ids are pinned by `enum` in its document instead,
    // and its reads' `response_format` to the document's form.
    const bounds = (name: unknown, schema: Json) =>
      name === "table_id" || name === "database_id" || name === "response_format"
        ? "id"
        : JSON.stringify(
            ["type", "minimum", "maximum", "minLength", "maxLength", "enum"].map((k) => schema[k]),
          );
    const operations = (d: Document, only?: Set<string>) =>
      Object.entries(d.paths)
        .filter(([path]) => !only || only.has(path))
        .flatMap(([path, item]) =>
          Object.entries(item)
            .filter(([key]) => key !== "parameters")
            .map(([method, operation]) => ({
              operation: `${method.toUpperCase()} ${path}`,
              parameters: [
                ...((item.parameters ?? []) as unknown as Json[]),
                ...((operation.parameters ?? []) as Json[]),
              ]
                .map(
                  (p) =>
                    `${p.in} ${p.name}${p.required ? "" : "?"} ${bounds(p.name, p.schema as Json)}`,
                )
                .sort(),
              statuses: Object.entries(operation.responses as Record<string, Json>)
                // Success bodies are checked against real answers above; errors by their codes.
                .map(
                  ([status, response]) => `${status} ${status < "400" ? "" : answersOf(response)}`,
                )
                .sort(),
            })),
        )
        .sort((a, b) => a.operation.localeCompare(b.operation));
    // The table's document holds its record routes; its change feed and stream are in
    // /openapi.json only.
    const recordPaths = Object.keys(document.paths).filter(
      (path) => path.startsWith("/public/") && !/\/changes(\/|$)/.test(path),
    );
    expect(operations(doc)).toEqual(operations(document, new Set(recordPaths)));
    // The names document asks for `response_format` on every read, which answers by id without.
    for (const { operation, parameters } of operations(named)) {
      const format = parameters.find((p) => p.startsWith("query response_format"));
      if (!format || operation.endsWith("/openapi.json")) continue;
      expect(format, operation).toBe("query response_format id");
    }
  });

  /**
   * Sends each body to a write route and compares the answer with the document's schema of
   * the route's body: what one accepts, the other must too, but for the `lenient` bodies, which
   * the route takes beyond what a typed client is offered (choices in any case, the other
   * document's keys).
   */
  async function disagreements(
    method: string,
    template: string,
    url: string,
    bodies: unknown[],
    documentId = "table",
    lenient: unknown[] = [],
  ): Promise<string[]> {
    const validate = validatorAt(documentId, [
      "paths",
      template,
      method.toLowerCase(),
      "requestBody",
      "content",
      "application/json",
      "schema",
    ]);
    const found: string[] = [];
    for (const body of bodies) {
      const documented = validate(body) === true;
      const response = await api(method, url, { token: tenant.writeToken, body });
      expect([200, 400], JSON.stringify(response.body)).toContain(response.status);
      const accepted = response.status === 200;
      const allowed = lenient.some((l) => JSON.stringify(l) === JSON.stringify(body));
      if (allowed && accepted && !documented) continue;
      if (documented !== accepted || allowed) {
        found.push(
          `${method} ${JSON.stringify(body).slice(0, 80)}: schema ${documented ? "accepts" : "refuses"}, route ${accepted ? "accepts" : `refuses (${JSON.stringify(response.body.extra)})`}`,
        );
      }
    }
    return found;
  }

  it("accepts the bodies its schema accepts and refuses the others", async () => {
    const records = `/public/v1/databases/${path.database_id}/tables/${path.table_id}/records`;
    const bodies: Record<string, unknown>[] = [
      { Text: "only" },
      FULL,
      { Text: "t", Number: "12.5" },
      { Text: "t", Number: " 7 " },
      { Text: "t", Number: "abc" },
      { Text: "t", Number: true },
      { Text: "t", Number: null },
      { Text: "t", Flag: "yes" },
      { Text: "t", Day: "2026-13-01" },
      { Text: "t", Day: "2026-01-02T00:00:00Z" },
      { Text: "t", Moment: "2026-01-02T03:04:05+02:00" },
      { Text: "t", Moment: "2026-01-02" },
      { Text: "t", Moment: "yesterday" },
      { Text: "t", Moment: "2026-01-02 03:04:05Z" },
      { Text: "t", Moment: "2026-01-02t03:04:05z" },
      { Text: "t", Moment: "2026-01-02T03:04:05" },
      { Text: "t", Day: "2026-02-30" },
      { Text: "t", Day: "0000-01-01" },
      { Text: "t", Email: "ada@example.123" },
      { Text: "a\u0000b" },
      { Text: "t", Email: "ada@localhost" },
      { Text: "t", Site: "https://exa mple.com" },
      { Text: "t", Site: "http://" },
      { Text: "t", Number: 1e300 },
      { Text: "t", Tags: ["a", "a"] },
      { Text: "t", Status: "Active" },
      { Text: "t", Status: "active" },
      { Text: "t", Status: "Nope" },
      { Text: "t", Status: 1 },
      { Text: "t", Tags: ["a", "b"] },
      { Text: "t", Tags: ["A", "a"] },
      { Text: "t", Tags: ["z"] },
      { Text: "t", Tags: "a" },
      { Text: "t", Tags: [] },
      { Text: "t", Email: "ada@example.com" },
      { Text: "t", Email: "not an address" },
      { Text: "t", Site: "https://example.com" },
      { Text: "t", Site: "mailto:ada@example.com" },
      { Text: "t", Site: "example.com" },
      { Text: "t", Phone: "+1 555 0100" },
      { Text: "t", Phone: "(555) 010-0100 ext. 12" },
      { Text: "t", Phone: "call me" },
      { Text: "t", Phone: "12" },
      { Text: "t", Meta: "any" },
      { Text: "t", Meta: [1, { a: null }] },
      { Text: "t", Long: "x".repeat(100_001) },
      { Text: "x".repeat(10_001) },
      { Text: "" },
      { Text: null },
      {},
      { Long: "no text" },
      { "999999": "unknown id" },
      { [table.id("Text")]: "by id" },
      { [table.id("Text")]: "by id", [table.id("2024")]: "digits" },
      { Text: "t", [table.id("Number")]: "not a number" },
      { [table.id("Text")]: "t", [table.id("Serial")]: 1 },
      { Text: "t", "999999": "unknown id" },
      { Text: "t", "2024": "a name of digits" },
      { Nope: 1 },
      { Serial: 1, Text: "t" },
      { Created: "2026-01-02T03:04:05.000Z", Text: "t" },
      { Attachment: null, Text: "t" },
    ];
    const created = await api("POST", records, { token: tenant.writeToken, body: { data: FULL } });
    const updates: Record<string, unknown>[] = [
      { Text: "changed" },
      { Number: 2 },
      {},
      { Text: "" },
      { Text: null },
      { Status: "nope" },
      { Serial: 2 },
      { [table.id("Number")]: 5 },
      { [table.id("Text")]: "" },
      { [table.id("Number")]: "five" },
    ];
    const lenient = [
      { Text: "t", Status: "active" },
      { Text: "t", Tags: ["A", "a"] },
      { [table.id("Text")]: "by id" },
      { [table.id("Text")]: "by id", [table.id("2024")]: "digits" },
      { [table.id("Number")]: 5 },
    ].map((data) => ({ data }));
    expect([
      ...(await disagreements(
        `POST`,
        `${V1}/records`,
        records,
        bodies.map((data) => ({ data })),
        "named",
        lenient,
      )),
      ...(await disagreements(
        "PATCH",
        `${V1}/records/{row_id}`,
        `${records}/${created.body.data.record.row_id}`,
        updates.map((data) => ({ data })),
        "named",
        lenient,
      )),
      ...(await disagreements(
        "POST",
        `${V1}/records/batch`,
        `${records}/batch`,
        [[{ Text: "a" }], [{ Text: "a" }, { Text: "" }], [{ Text: "a" }, {}], []].map((rows) => ({
          records: rows.map((data) => ({ data })),
        })),
        "named",
      )),
      ...(await disagreements(
        "PATCH",
        `${V1}/records/batch`,
        `${records}/batch`,
        [created.body.data.record.row_id, 0, -1].map((row_id) => ({
          records: [{ row_id, data: { [table.id("Number")]: 1 } }],
        })),
      )),
      ...(await disagreements(
        "POST",
        `${V1}/records/batch_delete`,
        `${records}/batch_delete`,
        [[0], [-1], [2 ** 53], [created.body.data.record.row_id]].map((row_ids) => ({ row_ids })),
      )),
    ]).toEqual([]);
  });

  it("describes the records of a table without fields", async () => {
    const bare = await createTable(api, tenant, []);
    const own = { database_id: bare.databaseId, table_id: bare.tableId };
    const document = await call("GET", `${V1}/openapi.json`, {
      token: tenant.readToken,
      path: own,
    });
    ajv.addSchema(document.body, "bare");
    const records = `/public/v1/databases/${own.database_id}/tables/${own.table_id}/records`;
    const created = await api("POST", records, { token: tenant.writeToken, body: { data: {} } });
    expect(created.status).toBe(200);
    for (const [template, url] of [
      [`${V1}/records`, records],
      [`${V1}/records/{row_id}`, `${records}/${created.body.data.record.row_id}`],
    ] as const) {
      const answer = await api("GET", url, { token: tenant.readToken });
      expect(answer.status).toBe(200);
      expectDescribed(document.body, "bare", "GET", template, answer);
    }
  });

  it("takes the query parameters its schemas take and refuses the others", async () => {
    const list = `/public/v1/databases/${path.database_id}/tables/${path.table_id}/records`;
    const operation = doc.paths[`${V1}/records`]!.get!;
    const parameters = operation.parameters as { name: string; schema: Json }[];
    const found: string[] = [];
    for (const [name, value] of [
      ["limit", "1"],
      ["limit", "1000"],
      ["limit", "0"],
      ["limit", "1001"],
      ["limit", "2.5"],
      ["offset", "0"],
      ["offset", "-1"],
      ["response_format", "ids"],
      ["response_format", "keys"],
      ["rich_text", "plain"],
      ["rich_text", "text"],
      ["where", "(Text,eq,x)"],
      ["where", `(Text,eq,${"x".repeat(4090)})`],
      ["sort", "-created_at"],
    ] as const) {
      const index = parameters.findIndex((parameter) => parameter.name === name);
      expect(index, name).toBeGreaterThanOrEqual(0);
      const validate = validatorAt("table", [
        "paths",
        `${V1}/records`,
        "get",
        "parameters",
        String(index),
        "schema",
      ]);
      // A query value is text; a number's schema reads it as the number it spells.
      const typed = parameters[index]!.schema.type === "integer" ? Number(value) : value;
      const documented = validate(typed) === true;
      const answer = await api("GET", list, { token: tenant.readToken, query: { [name]: value } });
      const accepted = answer.status === 200;
      if (documented !== accepted) {
        found.push(`${name}=${value.slice(0, 40)}: schema ${documented}, route ${answer.status}`);
      }
    }
    expect(found).toEqual([]);
  });

  it("keeps a field's own description beside what its type says", async () => {
    const described = await createTable(api, tenant, [
      { name: "Amount", type: "number", required: true, description: "Lifetime value in EUR" },
    ]);
    const own = { database_id: described.databaseId, table_id: described.tableId };
    const document = await call("GET", `${V1}/openapi.json`, {
      token: tenant.readToken,
      path: own,
      query: { response_format: "names" },
    });
    const schemas = document.body.components.schemas;
    expect(schemas.RecordDataByName.properties.Amount.description).toMatch(
      /^Lifetime value in EUR\. Rounded half away from zero/,
    );
    expect(schemas.RecordCreateData.properties.Amount.description).toMatch(
      /^Field \d+ \(required\): Lifetime value in EUR\. Rounded half away from zero/,
    );
  });

  it("asks for a required field named with digits by its id", async () => {
    const digits = await createTable(api, tenant, [
      { name: "7", type: "text", required: true },
      { name: "Note", type: "text" },
    ]);
    const own = { database_id: digits.databaseId, table_id: digits.tableId };
    const document = await call("GET", `${V1}/openapi.json`, {
      token: tenant.readToken,
      path: own,
    });
    ajv.addSchema(document.body, "digits");
    const id = digits.id("7");
    const records = `/public/v1/databases/${own.database_id}/tables/${own.table_id}/records`;
    const bodies = [{}, { Note: "n" }, { [id]: "x" }, { [id]: "x", [digits.id("Note")]: "n" }];
    expect(
      await disagreements(
        "POST",
        `${V1}/records`,
        records,
        bodies.map((data) => ({ data })),
        "digits",
      ),
    ).toEqual([]);
  });
});

describe("rate limits as the documents describe them", () => {
  let limited: TestSystem;

  beforeAll(async () => {
    limited = await startTestSystem({
      RATE_LIMITS: RECORD_TEST_RATE_LIMITS.replace(
        /auth_login_ip=[^,]+/,
        "auth_login_ip=1/60",
      ).replace(/records_token=[^,]+/, "records_token=1/60"),
    });
  }, 60_000);

  afterAll(async () => {
    await limited?.stop();
  });

  it("answers 429 with Retry-After where the documents say so", async () => {
    const limitedApi = client(limited.baseUrl);
    const tenant = await createTenant(limited, limitedApi);
    const table = await createTable(limitedApi, tenant, [{ name: "Text", type: "text" }]);
    const path = { database_id: tenant.databaseId, table_id: table.tableId };
    const tableDoc = await limitedApi(
      "GET",
      `/public/v1/databases/${path.database_id}/tables/${path.table_id}/openapi.json`,
      {
        token: tenant.owner.token,
      },
    );
    expect(tableDoc.status).toBe(200);
    ajv.addSchema(tableDoc.body, "limited");
    const login = { body: { email: tenant.owner.email, password: PASSWORD } };
    await limitedApi("POST", "/auth/login", login);
    const refusedLogin = await limitedApi("POST", "/auth/login", login);
    expect(refusedLogin.status).toBe(429);
    expectDescribed(document, "api", "POST", "/auth/login", refusedLogin);
    const records = `/public/v1/databases/${path.database_id}/tables/${path.table_id}/records`;
    await limitedApi("GET", records, { token: tenant.readToken });
    const refusedList = await limitedApi("GET", records, { token: tenant.readToken });
    expect(refusedList.status).toBe(429);
    expectDescribed(document, "api", "GET", `${V1}/records`, refusedList);
    expectDescribed(tableDoc.body, "limited", "GET", `${V1}/records`, refusedList);
    for (const answer of [refusedLogin, refusedList]) {
      expect(Number(answer.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    for (const [d, method, template] of [
      [document, "post", "/auth/login"],
      [document, "get", `${V1}/records`],
      [tableDoc.body as Document, "get", `${V1}/records`],
    ] as const) {
      const responses = d.paths[template]![method]!.responses as Record<string, Json>;
      expect(responses["429"]!.headers, `${method} ${template}`).toHaveProperty("Retry-After");
    }
  });
});
