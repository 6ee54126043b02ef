import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { expectError, q } from "./support/organizations.js";
import {
  ALL_TYPES_FIELDS,
  createTable,
  createTenant,
  expectValidation,
  list,
  RECORD_TEST_RATE_LIMITS,
  seed,
  setPlan,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * The public form routes through the gateway on the real services: the schema, JSON and
 * HTML-form submissions, and every refusal, each checked to have written nothing.
 */

type Api = ReturnType<typeof client>;

let sys: TestSystem;
let api: Api;

beforeAll(async () => {
  sys = await startTestSystem({
    RATE_LIMITS: `${RECORD_TEST_RATE_LIMITS},form_submit_ip=100000/60,form_submit_form=100000/60`,
  });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every writable field of ALL_TYPES_FIELDS. */
const WRITABLE = [
  "Text",
  "Long",
  "Number",
  "Flag",
  "Day",
  "Moment",
  "Status",
  "Tags",
  "Email",
  "Site",
  "Phone",
  "Meta",
];

async function createForm(
  api: Api,
  tenant: Tenant,
  table: TestTable,
  body: Record<string, unknown> = {},
): Promise<{ form_id: number; form_key: string }> {
  const response = await api("POST", "/form/create", {
    token: tenant.owner.token,
    query: q({ table_id: table.tableId }),
    body: { name: "Contact", fields: WRITABLE, required: ["Email"], ...body },
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data.form;
}

function submitJson(api: Api, key: string, data: unknown) {
  return api("POST", `/forms/${key}/submit`, { body: { data } });
}

function submitHtml(api: Api, key: string, pairs: [string, string][]) {
  return api("POST", `/forms/${key}/submit`, {
    rawBody: new URLSearchParams(pairs).toString(),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
}

async function total(tenant: Tenant, table: TestTable) {
  return (await list(api, tenant.readToken, table, { limit: 1 })).total;
}

describe("a form's schema", () => {
  it("gives the form's fields in its order, without a credential", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
    const form = await createForm(api, tenant, table, {
      name: "Leads",
      fields: ["Status", "Email"],
      success_message: "Thanks!",
    });
    const response = await api("GET", `/forms/${form.form_key}/schema`);
    expect(response.status, response.text).toBe(200);
    expect(response.body).toEqual({
      message: "success",
      data: {
        form: {
          name: "Leads",
          success_message: "Thanks!",
          fields: [
            {
              field_id: table.f.Status!.field_id,
              name: "Status",
              type: "single_select",
              required: false,
              description: "",
              options: table.f.Status!.options,
            },
            {
              field_id: table.f.Email!.field_id,
              name: "Email",
              type: "email",
              required: true,
              description: "",
              options: table.f.Email!.options,
            },
          ],
        },
      },
    });
    expectError(await api("GET", "/forms/NoSuchFormKey0000000000/schema"), 404, "form_not_found");
  });
});

describe("a form's page", () => {
  it("is HTML that any site may frame, with nothing loaded from elsewhere", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
    const form = await createForm(api, tenant, table, { name: "Ask <us>" });
    const page = await api("GET", `/forms/${form.form_key}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const policy = page.headers.get("content-security-policy") ?? "";
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain("frame-ancestors *");
    expect(policy).not.toContain("script-src");
    expect(page.headers.get("x-frame-options")).toBeNull();
    expect(page.text).toContain("<h1>Ask &lt;us&gt;</h1>");
    expect(page.text).not.toMatch(/<script|src=|href=/i);
    expect(page.text).toContain(`action="${form.form_key}/submit"`);
    for (const name of WRITABLE) expect(page.text).toContain(`name="${table.id(name)}"`);

    const missing = await api("GET", "/forms/NoSuchFormKey0000000000");
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toMatch(/^text\/html/);
    expect(missing.text).toContain("Form not found");
  });
});

describe("submitting", () => {
  it("writes one typed record from JSON, audited as the form, in the change log", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
    const form = await createForm(api, tenant, table);
    const data = {
      Text: "Ada",
      Number: 3.25,
      Flag: true,
      Status: "Active",
      Tags: ["a", "c"],
      Email: "ada@example.com",
    };
    const response = await submitJson(api, form.form_key, data);
    expect(response.status, response.text).toBe(200);
    expect(response.body).toEqual({ message: "success", data: { submitted: true } });
    const { records } = await list(api, tenant.readToken, table);
    expect(records).toHaveLength(1);
    expect(records[0]!.data).toMatchObject(data);

    // Audited with the form as the actor.
    let events: { actor: unknown; action: string }[] = [];
    for (const started = Date.now(); Date.now() - started < 10_000; await sleep(200)) {
      const audit = await api("GET", "/audit/list", {
        token: tenant.owner.token,
        query: q({ table_id: table.tableId, action: "record.created" }),
      });
      events = audit.body.data.events;
      if (events.length > 0) break;
    }
    expect(events[0]?.actor).toEqual({ type: "form", id: form.form_id });

    // In the table's change log, as the form's doing.
    const changes = await api(
      "GET",
      `${v1(table.databaseId, table.tableId).records.replace(/records$/, "changes")}`,
      {
        token: tenant.readToken,
      },
    );
    expect(changes.status, changes.text).toBe(200);
    expect(changes.body.data.changes.map((c: { actor: unknown }) => c.actor)).toEqual([
      { type: "form", id: form.form_id },
    ]);

    // Counted on the form, and not as a public API call.
    const got = await api("GET", "/form/get", {
      token: tenant.owner.token,
      query: q({ form_id: form.form_id }),
    });
    expect(got.body.data.form.submissions).toBe(1);
  });

  it("types an HTML form's text values by field type and answers with a thank-you page or a 303", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
    const form = await createForm(api, tenant, table, { success_message: "We got it <b>now</b>" });
    const id = (name: string) => table.id(name);
    const response = await submitHtml(api, form.form_key, [
      [id("Text"), "Grace"],
      [id("Long"), "Line one\nLine two"],
      [id("Number"), "12.5"],
      [id("Flag"), "on"],
      [id("Day"), "2026-03-04"],
      [id("Moment"), "2026-03-04T05:06"],
      [id("Status"), "Lost"],
      [id("Tags"), "a"],
      [id("Tags"), "a,b"],
      [id("Email"), "grace@example.com"],
      [id("Site"), "https://example.com/"],
      [id("Phone"), "+1 555 0100"],
      [id("Meta"), ""],
      ["website_confirm", ""],
    ]);
    expect(response.status, response.text).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/html/);
    expect(response.text).toContain("We got it &lt;b&gt;now&lt;/b&gt;");
    const { records } = await list(api, tenant.readToken, table);
    expect(records[0]!.data).toMatchObject({
      Text: "Grace",
      Long: "Line one\nLine two",
      Number: 12.5,
      Flag: true,
      Day: "2026-03-04",
      Moment: "2026-03-04T05:06:00.000Z",
      Status: "Lost",
      Tags: ["a", "a,b"],
      Email: "grace@example.com",
      Site: "https://example.com/",
      Phone: "+1 555 0100",
      Meta: null,
    });

    // An unticked checkbox is false; with a redirect_url the page's post gets a 303 there.
    await api("POST", "/form/update", {
      token: tenant.owner.token,
      query: q({ form_id: form.form_id }),
      body: { redirect_url: "https://example.com/thanks?from=form" },
    });
    const redirected = await submitHtml(api, form.form_key, [[id("Email"), "x@example.com"]]);
    expect(redirected.status).toBe(303);
    expect(redirected.headers.get("location")).toBe("https://example.com/thanks?from=form");
    const second = (await list(api, tenant.readToken, table)).records[1]!;
    expect(second.data).toMatchObject({ Email: "x@example.com", Flag: false, Text: null });
  });

  it("refuses what the form does not allow, writing nothing", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
    const form = await createForm(api, tenant, table, { fields: ["Text", "Number", "Email"] });
    const ok = { Email: "a@example.com" };
    // A field of the table that is not on the form, and one that does not exist.
    expectValidation(await submitJson(api, form.form_key, { ...ok, Status: "Active" }), [
      { key: "data.Status", source: "body" },
    ]);
    expectValidation(await submitJson(api, form.form_key, { ...ok, Nope: 1 }), [
      { key: "data.Nope", source: "body" },
    ]);
    // A missing required field, from JSON and from the page.
    expectValidation(await submitJson(api, form.form_key, { Text: "x" }), [
      { key: "data.Email", source: "body" },
    ]);
    // From the page, the refusal is a page that names the field to correct.
    const blank = await submitHtml(api, form.form_key, [[table.id("Email"), " "]]);
    expect(blank.status).toBe(400);
    expect(blank.headers.get("content-type")).toMatch(/^text\/html/);
    expect(blank.text).toContain("<li>Email: is required</li>");
    // Values of the wrong type, as the record routes refuse them.
    expectValidation(await submitJson(api, form.form_key, { ...ok, Number: "many" }), [
      { key: table.id("Number"), source: "body" },
    ]);
    const wrong = await submitHtml(api, form.form_key, [
      [table.id("Email"), "a@example.com"],
      [table.id("Number"), "many"],
    ]);
    expect(wrong.status).toBe(400);
    expect(wrong.text).toMatch(/<li>Number: [^<]+<\/li>/);
    expectValidation(await submitJson(api, form.form_key, { Email: "not an address" }), [
      { key: table.id("Email"), source: "body" },
    ]);
    // Bodies that are not the shape.
    expectValidation(await api("POST", `/forms/${form.form_key}/submit`, { body: ok }), [
      { key: "Email", source: "body" },
    ]);
    expect(await total(tenant, table)).toBe(0);

    // Unknown and inactive forms.
    expectError(await submitJson(api, "NoSuchFormKey0000000000", ok), 404, "form_not_found");
    await api("POST", "/form/update", {
      token: tenant.owner.token,
      query: q({ form_id: form.form_id }),
      body: { active: false },
    });
    expectError(await submitJson(api, form.form_key, ok), 404, "form_not_found");
    expectError(await api("GET", `/forms/${form.form_key}/schema`), 404, "form_not_found");
    // The page's own post (a person's) gets a page.
    const gone = await submitHtml(api, form.form_key, [[table.id("Email"), "a@example.com"]]);
    expect(gone.status).toBe(404);
    expect(gone.headers.get("content-type")).toContain("text/html");
    expect(gone.text).toContain("Form not found");
    await api("POST", "/form/delete", {
      token: tenant.owner.token,
      query: q({ form_id: form.form_id }),
    });
    expectError(await submitJson(api, form.form_key, ok), 404, "form_not_found");
    expect(await total(tenant, table)).toBe(0);
  });

  it("answers a filled bot trap as a success and stores nothing", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
    const form = await createForm(api, tenant, table);
    const html = await submitHtml(api, form.form_key, [
      [table.id("Email"), "bot@example.com"],
      ["website_confirm", "http://spam.example"],
    ]);
    expect(html.status).toBe(200);
    expect(html.text).toContain("Thank you");
    const json = await submitJson(api, form.form_key, {
      Email: "bot@example.com",
      website_confirm: "x",
    });
    expect(json.body).toEqual({ message: "success", data: { submitted: true } });
    expect(await total(tenant, table)).toBe(0);
  });

  it("stops at the plan's record limit, writing nothing", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Email", type: "email" }]);
    await setPlan(
      sys,
      tenant.orgId,
      "enterprise",
      "--records=2",
      "--api-calls-per-month=3000",
      "--file-storage-bytes=100000000",
      "--transfer-bytes-per-month=1000000000",
      "--members=3",
      "--max-file-bytes=10000000",
    );
    const form = await createForm(api, tenant, table, { fields: ["Email"] });
    await seed(api, tenant.writeToken, table, [{ Email: "a@example.com" }]);
    expect((await submitJson(api, form.form_key, { Email: "b@example.com" })).status).toBe(200);
    expectError(
      await submitJson(api, form.form_key, { Email: "c@example.com" }),
      403,
      "record_limit_exceeded",
    );
    const page = await submitHtml(api, form.form_key, [[table.id("Email"), "d@example.com"]]);
    expect(page.status).toBe(403);
    expect(page.text).toContain("cannot take answers right now");
    expect(await total(tenant, table)).toBe(2);
  });
});

describe("the form_submit_ip rate limit", () => {
  let limited: TestSystem;
  let limitedApi: Api;

  beforeAll(async () => {
    limited = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
    limitedApi = client(limited.baseUrl);
  });

  afterAll(async () => {
    await limited?.stop();
  });

  it("answers the 11th submission of a minute from one IP with 429, writing nothing", async () => {
    const tenant = await createTenant(limited, limitedApi);
    const table = await createTable(limitedApi, tenant, [{ name: "Email", type: "email" }]);
    const form = await createForm(limitedApi, tenant, table, { fields: ["Email"] });
    for (let i = 0; i < 10; i++) {
      const response = await submitJson(limitedApi, form.form_key, { Email: `${i}@example.com` });
      expect(response.status, response.text).toBe(200);
    }
    const eleventh = await submitJson(limitedApi, form.form_key, { Email: "11@example.com" });
    expect(eleventh.status).toBe(429);
    expect(eleventh.body).toEqual({ message: "too_many_requests", data: {} });
    expect(Number(eleventh.headers.get("retry-after"))).toBeGreaterThan(0);
    // From the page, a person reads it on a page, with the same Retry-After.
    const fromPage = await submitHtml(limitedApi, form.form_key, [
      [table.id("Email"), "12@example.com"],
    ]);
    expect(fromPage.status).toBe(429);
    expect(fromPage.headers.get("content-type")).toContain("text/html");
    expect(fromPage.text).toContain("Too many submissions");
    expect(Number(fromPage.headers.get("retry-after"))).toBeGreaterThan(0);
    const { total: held } = await list(limitedApi, tenant.readToken, table, { limit: 1 });
    expect(held).toBe(10);
  });
});
