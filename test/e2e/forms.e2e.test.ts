import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { addMember, expectError, q } from "./support/organizations.js";
import {
  ALL_TYPES_FIELDS,
  createTable,
  createTenant,
  expectValidation,
  ISO_MILLIS,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
} from "./support/records.js";

/** The /form management routes through the gateway on the real services. */

let sys: TestSystem;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function createForm(tenant: Tenant, table: TestTable, body: Record<string, unknown>) {
  return api("POST", "/form/create", {
    token: tenant.owner.token,
    query: q({ table_id: table.tableId }),
    body,
  });
}

async function formsOf(tenant: Tenant, table: TestTable) {
  const response = await api("GET", "/form/list", {
    token: tenant.owner.token,
    query: q({ table_id: table.tableId }),
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data.forms as Record<string, unknown>[];
}

/** The audit events of a table with this action, waited for (they arrive asynchronously). */
async function auditEvents(tenant: Tenant, table: TestTable, action: string, count: number) {
  let events: Record<string, unknown>[] = [];
  for (const started = Date.now(); Date.now() - started < 10_000; await sleep(200)) {
    const response = await api("GET", "/audit/list", {
      token: tenant.owner.token,
      query: q({ table_id: table.tableId, action }),
    });
    events = response.body.data.events;
    if (events.length >= count) break;
  }
  expect(events.length, action).toBe(count);
  return events;
}

describe("/form routes", () => {
  it("create, read, list, update and delete a form, each audited", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
    const created = await createForm(tenant, table, {
      name: "Contact us",
      fields: ["Text", table.f.Email!.field_id, "status"],
      required: ["email"],
      success_message: "Thanks, we will be in touch.",
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const form = created.body.data.form;
    expect(form).toEqual({
      form_id: expect.any(Number),
      form_key: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
      organization_id: tenant.orgId,
      database_id: tenant.databaseId,
      table_id: table.tableId,
      name: "Contact us",
      fields: [table.f.Text!.field_id, table.f.Email!.field_id, table.f.Status!.field_id],
      required: [table.f.Email!.field_id],
      success_message: "Thanks, we will be in touch.",
      redirect_url: "",
      active: true,
      submissions: 0,
      created_at: expect.stringMatching(ISO_MILLIS),
      updated_at: expect.stringMatching(ISO_MILLIS),
    });
    // A second form gets another key.
    const other = await createForm(tenant, table, { name: "Other", fields: ["Text"] });
    expect(other.body.data.form.form_key).not.toBe(form.form_key);

    const got = await api("GET", "/form/get", {
      token: tenant.owner.token,
      query: q({ form_id: form.form_id }),
    });
    expect(got.body).toEqual({ message: "success", data: { form } });
    expect((await formsOf(tenant, table)).map((f) => f.form_id)).toEqual([
      form.form_id,
      other.body.data.form.form_id,
    ]);

    const updated = await api("POST", "/form/update", {
      token: tenant.owner.token,
      query: q({ form_id: form.form_id }),
      body: {
        fields: ["Text", "Status"],
        redirect_url: "https://example.com/thanks",
        active: false,
      },
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body.data.form).toMatchObject({
      name: "Contact us",
      fields: [table.f.Text!.field_id, table.f.Status!.field_id],
      // The e-mail field left the form, so it is no longer required.
      required: [],
      redirect_url: "https://example.com/thanks",
      active: false,
      form_key: form.form_key,
    });

    // A deleted field leaves the form.
    const removed = await api("POST", "/field/delete", {
      token: tenant.owner.token,
      query: q({ field_id: table.f.Status!.field_id }),
    });
    expect(removed.status).toBe(200);
    const after = await api("GET", "/form/get", {
      token: tenant.owner.token,
      query: q({ form_id: form.form_id }),
    });
    expect(after.body.data.form.fields).toEqual([table.f.Text!.field_id]);

    const deleted = await api("POST", "/form/delete", {
      token: tenant.owner.token,
      query: q({ form_id: form.form_id }),
    });
    expect(deleted.body).toEqual({ message: "success", data: {} });
    expectError(
      await api("GET", "/form/get", {
        token: tenant.owner.token,
        query: q({ form_id: form.form_id }),
      }),
      404,
      "form_not_found",
    );

    const [createdEvent] = await auditEvents(tenant, table, "form.created", 2).then((events) =>
      events.filter((event) => (event.target as { id: number }).id === form.form_id),
    );
    expect(createdEvent).toMatchObject({
      actor: { type: "user", id: tenant.owner.id },
      target: { type: "form", id: form.form_id },
      changes: expect.arrayContaining([{ key: "name", old: null, new: "Contact us" }]),
    });
    const [updatedEvent] = await auditEvents(tenant, table, "form.updated", 1);
    expect(updatedEvent!.changes).toEqual(
      expect.arrayContaining([{ key: "active", old: true, new: false }]),
    );
    await auditEvents(tenant, table, "form.deleted", 1);
  });

  it("refuse bad definitions with nothing written", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
    for (const type of ["Attachment", "Serial", "Created", "Updated"]) {
      expectError(
        await createForm(tenant, table, { name: "F", fields: ["Text", type] }),
        400,
        "form_field_not_allowed",
      );
    }
    expectValidation(await createForm(tenant, table, { name: "F", fields: [] }), [
      { key: "fields", source: "body" },
    ]);
    expectValidation(await createForm(tenant, table, { name: "F", fields: ["Nope"] }), [
      { key: "fields.0", source: "body" },
    ]);
    expectValidation(
      await createForm(tenant, table, { name: "F", fields: ["Text"], required: ["Email"] }),
      [{ key: "required.0", source: "body" }],
    );
    for (const url of [
      "http://example.com/thanks",
      "javascript:alert(1)",
      "/relative",
      `https://example.com/${"x".repeat(2_048)}`,
    ]) {
      expectValidation(
        await createForm(tenant, table, { name: "F", fields: ["Text"], redirect_url: url }),
        [{ key: "redirect_url", source: "body" }],
      );
    }
    expectValidation(await createForm(tenant, table, { name: "F", fields: ["Text"], extra: 1 }), [
      { key: "extra", source: "body" },
    ]);
    expect(await formsOf(tenant, table)).toEqual([]);
    // http on the local machine is allowed, for development.
    const local = await createForm(tenant, table, {
      name: "F",
      fields: ["Text"],
      redirect_url: "http://localhost:3000/thanks",
    });
    expect(local.status, JSON.stringify(local.body)).toBe(200);

    // Once the table requires a field, a form must show it: without it no submission could
    // ever add a record.
    const madeRequired = await api("POST", "/field/update", {
      token: tenant.owner.token,
      query: q({ field_id: table.f.Email!.field_id }),
      body: { required: true },
    });
    expect(madeRequired.status, JSON.stringify(madeRequired.body)).toBe(200);
    expectValidation(await createForm(tenant, table, { name: "G", fields: ["Text"] }), [
      { key: "fields", source: "body" },
    ]);
    const formId = local.body.data.form.form_id;
    expectValidation(
      await api("POST", "/form/update", {
        token: tenant.owner.token,
        query: q({ form_id: formId }),
        body: { fields: ["Text", "Number"] },
      }),
      [{ key: "fields", source: "body" }],
    );
    expect((await formsOf(tenant, table)).map((form) => [form.name, form.fields])).toEqual([
      ["F", [Number(table.id("Text"))]],
    ]);
    const withEmail = await createForm(tenant, table, {
      name: "G",
      fields: ["Text", "Email"],
    });
    expect(withEmail.status, JSON.stringify(withEmail.body)).toBe(200);
  });

  it("let editors manage forms, viewers only read them, and other organizations see none", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const editor = await signUp(sys, api);
    const viewer = await signUp(sys, api);
    await addMember(api, tenant.owner, tenant.orgId, editor, "editor");
    await addMember(api, tenant.owner, tenant.orgId, viewer, "viewer");
    const byEditor = await api("POST", "/form/create", {
      token: editor.token,
      query: q({ table_id: table.tableId }),
      body: { name: "F", fields: ["Name"] },
    });
    expect(byEditor.status).toBe(200);
    const formId = byEditor.body.data.form.form_id;
    expectError(
      await api("POST", "/form/create", {
        token: viewer.token,
        query: q({ table_id: table.tableId }),
        body: { name: "F", fields: ["Name"] },
      }),
      403,
      "organization_forbidden",
    );
    for (const [path, body] of [
      ["/form/update", { name: "G" }],
      ["/form/delete", undefined],
    ] as const) {
      expectError(
        await api("POST", path, { token: viewer.token, query: q({ form_id: formId }), body }),
        403,
        "organization_forbidden",
      );
    }
    const read = await api("GET", "/form/get", {
      token: viewer.token,
      query: q({ form_id: formId }),
    });
    expect(read.status).toBe(200);
    expect(read.body.data.form.name).toBe("F");

    const stranger = await signUp(sys, api);
    expectError(
      await api("GET", "/form/get", { token: stranger.token, query: q({ form_id: formId }) }),
      404,
      "form_not_found",
    );
    expectError(
      await api("GET", "/form/list", {
        token: stranger.token,
        query: q({ table_id: table.tableId }),
      }),
      404,
      "table_not_found",
    );
    // API tokens do not manage forms.
    const byToken = await api("GET", "/form/list", {
      token: tenant.writeToken,
      query: q({ table_id: table.tableId }),
    });
    expect(byToken.status).toBe(401);
  });

  it("stop at the plan's forms across the organization, also under parallel creates", async () => {
    const tenant = await createTenant(sys, api);
    const limits = await api("GET", "/organization/limits", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId }),
    });
    expect(limits.body.data.limits.forms).toBe(3);
    const [a, b] = await Promise.all([
      createTable(api, tenant, [{ name: "Name", type: "text" }]),
      createTable(api, tenant, [{ name: "Name", type: "text" }]),
    ]);
    const responses = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        createForm(tenant, i % 2 === 0 ? a! : b!, { name: `F${i}`, fields: ["Name"] }),
      ),
    );
    const statuses = responses.map((r) => `${r.status} ${r.body.message}`).sort();
    expect(statuses).toEqual([
      ...Array(3).fill("200 success"),
      ...Array(5).fill("403 form_limit_exceeded"),
    ]);
    expect((await formsOf(tenant, a!)).length + (await formsOf(tenant, b!)).length).toBe(3);
    // A delete gives its room back.
    const held = (await formsOf(tenant, a!)).concat(await formsOf(tenant, b!));
    await api("POST", "/form/delete", {
      token: tenant.owner.token,
      query: q({ form_id: held[0]!.form_id as number }),
    });
    expect((await createForm(tenant, a!, { name: "Again", fields: ["Name"] })).status).toBe(200);
  });
});
