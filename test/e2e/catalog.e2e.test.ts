import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { addMember, createOrg, expectError, q } from "./support/organizations.js";

let sys: TestSystem;
let api: ReturnType<typeof client>;
let owner: SignedUpUser;
let viewer: SignedUpUser;
let editor: SignedUpUser;
let stranger: SignedUpUser;
let orgId: number;

const isoMillis = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

beforeAll(async () => {
  sys = await startTestSystem();
  api = client(sys.baseUrl);
  [owner, viewer, editor, stranger] = await Promise.all([1, 2, 3, 4].map(() => signUp(sys, api)));
  orgId = (await createOrg(api, owner)).organization_id;
  await addMember(api, owner, orgId, viewer, "viewer");
  await addMember(api, owner, orgId, editor, "editor");
  await createOrg(api, stranger);
});

afterAll(async () => {
  await sys?.stop();
});

async function createDatabase(
  name = `DB ${Math.random().toString(36).slice(2, 8)}`,
  token = owner.token,
) {
  const response = await api("POST", "/database/create", {
    token,
    query: q({ organization_id: orgId }),
    body: { name },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data.database;
}

async function createTable(databaseId: number, body: Record<string, unknown> = {}) {
  const response = await api("POST", "/table/create", {
    token: owner.token,
    query: q({ database_id: databaseId }),
    body: { name: `Table ${Math.random().toString(36).slice(2, 8)}`, ...body },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data;
}

async function createField(tableId: number, body: Record<string, unknown>, token = owner.token) {
  return api("POST", "/field/create", { token, query: q({ table_id: tableId }), body });
}

describe("databases", () => {
  it("creates, gets, lists, updates and deletes a database", async () => {
    const created = await api("POST", "/database/create", {
      token: owner.token,
      query: q({ organization_id: orgId }),
      body: { name: "  Sales  ", description: "Pipeline" },
    });
    expect(created.status).toBe(200);
    const database = created.body.data.database;
    expect(database).toEqual({
      database_id: expect.any(Number),
      organization_id: orgId,
      name: "Sales",
      description: "Pipeline",
      created_at: expect.stringMatching(isoMillis),
      updated_at: expect.stringMatching(isoMillis),
    });
    const id = q({ database_id: database.database_id });
    expect((await api("GET", "/database/get", { token: viewer.token, query: id })).body).toEqual({
      message: "success",
      data: { database },
    });
    const list = await api("GET", "/database/list", {
      token: viewer.token,
      query: q({ organization_id: orgId }),
    });
    expect(list.body.data.databases).toContainEqual(database);
    const updated = await api("POST", "/database/update", {
      token: editor.token,
      query: id,
      body: { name: "Sales 2026" },
    });
    expect(updated.body.data.database).toMatchObject({
      name: "Sales 2026",
      description: "Pipeline",
    });
    const deleted = await api("POST", "/database/delete", { token: owner.token, query: id });
    expect(deleted.body).toEqual({
      message: "success",
      data: { deleted_id: database.database_id },
    });
    expectError(
      await api("GET", "/database/get", { token: owner.token, query: id }),
      404,
      "database_not_found",
    );
    expectError(
      await api("POST", "/database/delete", { token: owner.token, query: id }),
      404,
      "database_not_found",
    );
  });

  it("refuses bad names with the validation shape", async () => {
    for (const name of ["", "   ", "x".repeat(101), "bad\u0000name", "line\nbreak"]) {
      const response = await api("POST", "/database/create", {
        token: owner.token,
        query: q({ organization_id: orgId }),
        body: { name },
      });
      expect(response.status, JSON.stringify(name)).toBe(400);
      expect(response.body).toMatchObject({
        status_code: 400,
        extra: [expect.objectContaining({ key: "name", source: "body" })],
      });
    }
  });

  it("counts characters in names and descriptions, not UTF-16 units", async () => {
    // Each of these is one character in two UTF-16 units.
    const name = "🗂".repeat(100);
    const description = "𝔸".repeat(1000);
    const database = await createDatabase(name);
    expect(database.name).toBe(name);
    const updated = await api("POST", "/database/update", {
      token: owner.token,
      query: q({ database_id: database.database_id }),
      body: { description },
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body.data.database.description).toBe(description);
    const { table } = await createTable(database.database_id, { name, description });
    expect(table.name).toBe(name);
    const field = await createField(table.table_id, { name, type: "text", description });
    expect(field.status, JSON.stringify(field.body)).toBe(200);
    expect(field.body.data.field).toMatchObject({ name, description });

    const tooLong = await api("POST", "/database/create", {
      token: owner.token,
      query: q({ organization_id: orgId }),
      body: { name: "🗂".repeat(101) },
    });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.extra).toEqual([
      { key: "name", message: "must be 1-100 characters", source: "body", code: "too_long" },
    ]);
  });
});

describe("tables", () => {
  it("creates a table with fields, reads, lists, updates and deletes it", async () => {
    const database = await createDatabase();
    const created = await api("POST", "/table/create", {
      token: owner.token,
      query: q({ database_id: database.database_id }),
      body: {
        name: "Contacts",
        description: "People",
        fields: [
          { name: "Name", type: "text", required: true },
          { name: "Age", type: "number", options: { decimals: 0, min: 0 } },
          {
            name: "Status",
            type: "single_select",
            options: { choices: [{ name: "Active" }, { name: "Lost", color: "red" }] },
          },
        ],
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { table, fields } = created.body.data;
    expect(table).toEqual({
      table_id: expect.any(Number),
      database_id: database.database_id,
      name: "Contacts",
      description: "People",
      created_at: expect.stringMatching(isoMillis),
      updated_at: expect.stringMatching(isoMillis),
    });
    expect(
      fields.map((f: { name: string; type: string; position: number }) => [
        f.name,
        f.type,
        f.position,
      ]),
    ).toEqual([
      ["Name", "text", 0],
      ["Age", "number", 1],
      ["Status", "single_select", 2],
    ]);
    expect(fields[0]).toEqual({
      field_id: expect.any(Number),
      table_id: table.table_id,
      name: "Name",
      type: "text",
      options: expect.any(Object),
      required: true,
      description: expect.any(String),
      position: 0,
      created_at: expect.stringMatching(isoMillis),
      updated_at: expect.stringMatching(isoMillis),
    });
    const choices = fields[2].options.choices;
    expect(choices).toEqual([
      expect.objectContaining({ id: expect.any(String), name: "Active" }),
      expect.objectContaining({ id: expect.any(String), name: "Lost", color: "red" }),
    ]);

    const tid = q({ table_id: table.table_id });
    const got = await api("GET", "/table/get", { token: viewer.token, query: tid });
    expect(got.body.data).toEqual({ table, fields });
    const list = await api("GET", "/table/list", {
      token: viewer.token,
      query: q({ database_id: database.database_id }),
    });
    expect(list.body.data.tables).toEqual([table]);
    const updated = await api("POST", "/table/update", {
      token: editor.token,
      query: tid,
      body: { name: "People" },
    });
    expect(updated.body.data.table).toMatchObject({ table_id: table.table_id, name: "People" });
    expectError(
      await api("POST", "/table/create", {
        token: owner.token,
        query: q({ database_id: database.database_id }),
        body: { name: "PEOPLE" },
      }),
      400,
      "table_name_taken",
    );
    const deleted = await api("POST", "/table/delete", { token: owner.token, query: tid });
    expect(deleted.body).toEqual({ message: "success", data: { deleted_id: table.table_id } });
    expectError(
      await api("GET", "/table/get", { token: owner.token, query: tid }),
      404,
      "table_not_found",
    );
    expectError(
      await api("GET", "/field/list", { token: owner.token, query: tid }),
      404,
      "table_not_found",
    );
  });

  it("creates nothing when one initial field is invalid", async () => {
    const database = await createDatabase();
    const response = await api("POST", "/table/create", {
      token: owner.token,
      query: q({ database_id: database.database_id }),
      body: {
        name: "Broken",
        fields: [
          { name: "Ok", type: "text" },
          { name: "Bad", type: "number", options: { decimals: 99 } },
        ],
      },
    });
    expect(response.status).toBe(400);
    expect(response.body.message).toBe("invalid_field_options");
    const list = await api("GET", "/table/list", {
      token: owner.token,
      query: q({ database_id: database.database_id }),
    });
    expect(list.body.data.tables).toEqual([]);
  });

  it("refuses names of invisible characters only and creates nothing", async () => {
    const database = await createDatabase();
    const invisible = "\u200b \u2060\ufeff";
    const refused = await api("POST", "/table/create", {
      token: owner.token,
      query: q({ database_id: database.database_id }),
      body: { name: invisible },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      status_code: 400,
      detail: "Validation failed for POST /table/create",
      extra: [
        {
          key: "name",
          message: "must contain a visible character",
          source: "body",
          code: "invalid_value",
        },
      ],
    });
    const tables = await api("GET", "/table/list", {
      token: owner.token,
      query: q({ database_id: database.database_id }),
    });
    expect(tables.body.data.tables).toEqual([]);

    const { table } = await createTable(database.database_id);
    const field = await createField(table.table_id, { name: "\u200c\u200d", type: "text" });
    expect(field.status).toBe(400);
    expect(field.body.extra).toEqual([
      {
        key: "name",
        message: "must contain a visible character",
        source: "body",
        code: "invalid_value",
      },
    ]);
    const choice = await createField(table.table_id, {
      name: "Stage",
      type: "single_select",
      options: { choices: [{ name: "New" }, { name: "\u200b" }] },
    });
    expect(choice.status).toBe(400);
    expect(choice.body).toEqual({
      message: "invalid_field_options",
      data: {
        errors: [{ key: "options.choices.1.name", message: "must contain a visible character" }],
      },
    });
    const fields = await api("GET", "/field/list", {
      token: owner.token,
      query: q({ table_id: table.table_id }),
    });
    expect(fields.body.data.fields).toEqual([]);
  });
});

describe("fields", () => {
  it("accepts valid options for every type", async () => {
    const { table } = await createTable((await createDatabase()).database_id);
    const valid: [string, Record<string, unknown>][] = [
      ["text", { max_length: 200 }],
      ["long_text", {}],
      ["number", { decimals: 2, min: -10, max: 10 }],
      ["boolean", {}],
      ["date", {}],
      ["datetime", {}],
      ["single_select", { choices: [{ name: "A" }, { name: "B" }] }],
      ["multi_select", { choices: [{ name: "x" }] }],
      ["email", {}],
      ["url", {}],
      ["phone", {}],
      ["json", {}],
      ["file", { max_size: 1_000_000, allowed_types: ["image/*", "application/pdf"] }],
      ["autonumber", {}],
      ["created_at", {}],
      ["updated_at", {}],
    ];
    for (const [type, options] of valid) {
      const response = await createField(table.table_id, { name: `F ${type}`, type, options });
      expect(response.status, `${type}: ${JSON.stringify(response.body)}`).toBe(200);
      expect(response.body.data.field).toMatchObject({ type, name: `F ${type}` });
    }
    const list = await api("GET", "/field/list", {
      token: owner.token,
      query: q({ table_id: table.table_id }),
    });
    expect(list.body.data.fields.map((f: { type: string }) => f.type)).toEqual(
      valid.map(([type]) => type),
    );
    expect(list.body.data.fields.map((f: { position: number }) => f.position)).toEqual(
      valid.map((_, i) => i),
    );
  });

  it("refuses invalid options with invalid_field_options naming the option", async () => {
    const { table } = await createTable((await createDatabase()).database_id);
    const invalid: [string, Record<string, unknown>, string][] = [
      ["text", { max_length: 0 }, "options.max_length"],
      ["text", { colour: "red" }, "options.colour"],
      ["number", { decimals: 11 }, "options.decimals"],
      ["number", { min: 5, max: 1 }, "options"],
      ["single_select", { choices: "A,B" }, "options.choices"],
      ["boolean", { default: true }, "options.default"],
      ["file", { max_size: -1 }, "options.max_size"],
    ];
    for (const [type, options, key] of invalid) {
      const response = await createField(table.table_id, { name: `Bad ${type}`, type, options });
      expect(response.status, `${type} ${JSON.stringify(options)}`).toBe(400);
      expect(response.body.message).toBe("invalid_field_options");
      expect(response.body.data.errors).toEqual(
        expect.arrayContaining([expect.objectContaining({ key: expect.stringContaining(key) })]),
      );
    }
    const unknownType = await createField(table.table_id, { name: "Weird", type: "rating" });
    expect(unknownType.status).toBe(400);
    expect(unknownType.body.extra).toEqual([
      expect.objectContaining({ key: "type", source: "body" }),
    ]);
    const list = await api("GET", "/field/list", {
      token: owner.token,
      query: q({ table_id: table.table_id }),
    });
    expect(list.body.data.fields).toEqual([]);
  });

  it("moves, renames, converts and deletes fields", async () => {
    const { table } = await createTable((await createDatabase()).database_id, {
      fields: [
        { name: "A", type: "text" },
        { name: "B", type: "text" },
        { name: "C", type: "json" },
      ],
    });
    const fields = (
      await api("GET", "/field/list", {
        token: owner.token,
        query: q({ table_id: table.table_id }),
      })
    ).body.data.fields;
    const [a, , c] = fields;
    const moved = await api("POST", "/field/update", {
      token: owner.token,
      query: q({ field_id: c.field_id }),
      body: { position: 0 },
    });
    expect(moved.body.data.field.position).toBe(0);
    const last = await api("POST", "/field/update", {
      token: owner.token,
      query: q({ field_id: a.field_id }),
      body: { position: 99 },
    });
    expect(last.body.data.field.position).toBe(2);
    const order = (
      await api("GET", "/field/list", {
        token: owner.token,
        query: q({ table_id: table.table_id }),
      })
    ).body.data.fields;
    expect(order.map((f: { name: string }) => f.name)).toEqual(["C", "B", "A"]);

    expectError(
      await api("POST", "/field/update", {
        token: owner.token,
        query: q({ field_id: a.field_id }),
        body: { name: "b" },
      }),
      400,
      "field_name_taken",
    );
    const converted = await api("POST", "/field/update", {
      token: owner.token,
      query: q({ field_id: a.field_id }),
      body: { type: "number" },
    });
    expect(converted.body.data.field.type).toBe("number");
    expectError(
      await api("POST", "/field/update", {
        token: owner.token,
        query: q({ field_id: c.field_id }),
        body: { type: "date" },
      }),
      400,
      "field_type_change_invalid",
    );
    const readOnlyRequired = await createField(table.table_id, {
      name: "N",
      type: "autonumber",
      required: true,
    });
    expect(readOnlyRequired.status).toBe(400);
    expect(readOnlyRequired.body.message).toBe("invalid_field_options");

    const deleted = await api("POST", "/field/delete", {
      token: owner.token,
      query: q({ field_id: c.field_id }),
    });
    expect(deleted.body).toEqual({ message: "success", data: {} });
    expectError(
      await api("POST", "/field/delete", {
        token: owner.token,
        query: q({ field_id: c.field_id }),
      }),
      404,
      "field_not_found",
    );
    const remaining = (
      await api("GET", "/field/list", {
        token: owner.token,
        query: q({ table_id: table.table_id }),
      })
    ).body.data.fields;
    expect(remaining.map((f: { name: string; position: number }) => [f.name, f.position])).toEqual([
      ["B", 0],
      ["A", 1],
    ]);
  });

  it("renames a choice by id", async () => {
    const { fields } = await createTable((await createDatabase()).database_id, {
      fields: [
        {
          name: "Stage",
          type: "single_select",
          options: { choices: [{ name: "New" }, { name: "Won" }] },
        },
      ],
    });
    const [stage] = fields;
    const [fresh, won] = stage.options.choices;
    const renamed = await api("POST", "/field/update", {
      token: owner.token,
      query: q({ field_id: stage.field_id }),
      body: { options: { choices: [{ id: fresh.id, name: "Lead" }, won] } },
    });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body.data.field.options.choices).toEqual([
      expect.objectContaining({ id: fresh.id, name: "Lead" }),
      won,
    ]);
  });
});

describe("access", () => {
  it("lets viewers read but not write, and editors write", async () => {
    const database = await createDatabase();
    const { table, fields } = await createTable(database.database_id, {
      fields: [{ name: "X", type: "text" }],
    });
    const writes: [string, Record<string, number>, unknown][] = [
      ["/database/create", { organization_id: orgId }, { name: "V" }],
      ["/database/update", { database_id: database.database_id }, { name: "V" }],
      ["/database/delete", { database_id: database.database_id }, undefined],
      ["/table/create", { database_id: database.database_id }, { name: "V" }],
      ["/table/update", { table_id: table.table_id }, { name: "V" }],
      ["/table/delete", { table_id: table.table_id }, undefined],
      ["/field/create", { table_id: table.table_id }, { name: "V", type: "text" }],
      ["/field/update", { field_id: fields[0].field_id }, { name: "V" }],
      ["/field/delete", { field_id: fields[0].field_id }, undefined],
    ];
    for (const [path, query, body] of writes) {
      expectError(
        await api("POST", path, { token: viewer.token, query: q(query), body }),
        403,
        "organization_forbidden",
      );
    }
    expect(
      (
        await api("GET", "/table/get", {
          token: viewer.token,
          query: q({ table_id: table.table_id }),
        })
      ).body.data.fields,
    ).toHaveLength(1);
    expect(
      (await createField(table.table_id, { name: "By editor", type: "boolean" }, editor.token))
        .status,
    ).toBe(200);
    expect((await createDatabase("By editor", editor.token)).name).toBe("By editor");
  });

  it("answers 404 on every id to a user of another organization, and changes nothing", async () => {
    const database = await createDatabase();
    const { table, fields } = await createTable(database.database_id, {
      fields: [{ name: "X", type: "text" }],
    });
    const calls: [string, string, Record<string, number>, unknown, string][] = [
      [
        "POST",
        "/database/create",
        { organization_id: orgId },
        { name: "Mine" },
        "organization_not_found",
      ],
      ["GET", "/database/list", { organization_id: orgId }, undefined, "organization_not_found"],
      [
        "GET",
        "/database/get",
        { database_id: database.database_id },
        undefined,
        "database_not_found",
      ],
      [
        "POST",
        "/database/update",
        { database_id: database.database_id },
        { name: "Mine" },
        "database_not_found",
      ],
      [
        "POST",
        "/database/delete",
        { database_id: database.database_id },
        undefined,
        "database_not_found",
      ],
      [
        "POST",
        "/table/create",
        { database_id: database.database_id },
        { name: "Mine" },
        "database_not_found",
      ],
      [
        "GET",
        "/table/list",
        { database_id: database.database_id },
        undefined,
        "database_not_found",
      ],
      ["GET", "/table/get", { table_id: table.table_id }, undefined, "table_not_found"],
      ["POST", "/table/update", { table_id: table.table_id }, { name: "Mine" }, "table_not_found"],
      ["POST", "/table/delete", { table_id: table.table_id }, undefined, "table_not_found"],
      [
        "POST",
        "/field/create",
        { table_id: table.table_id },
        { name: "Mine", type: "text" },
        "table_not_found",
      ],
      ["GET", "/field/list", { table_id: table.table_id }, undefined, "table_not_found"],
      [
        "POST",
        "/field/update",
        { field_id: fields[0].field_id },
        { name: "Mine" },
        "field_not_found",
      ],
      ["POST", "/field/delete", { field_id: fields[0].field_id }, undefined, "field_not_found"],
    ];
    for (const [method, path, query, body, message] of calls) {
      const response = await api(method, path, { token: stranger.token, query: q(query), body });
      expect(response.status, `${path}: ${JSON.stringify(response.body)}`).toBe(404);
      expect([message, "organization_not_found"]).toContain(response.body.message);
    }
    const after = await api("GET", "/table/get", {
      token: owner.token,
      query: q({ table_id: table.table_id }),
    });
    expect(after.body.data).toEqual({ table, fields });
    expect(
      (
        await api("GET", "/database/get", {
          token: owner.token,
          query: q({ database_id: database.database_id }),
        })
      ).body.data.database,
    ).toEqual(database);
  });
});

describe("cascades", () => {
  it("deleting a database removes its tables and fields", async () => {
    const database = await createDatabase();
    const { table, fields } = await createTable(database.database_id, {
      fields: [{ name: "X", type: "text" }],
    });
    await api("POST", "/database/delete", {
      token: owner.token,
      query: q({ database_id: database.database_id }),
    });
    expectError(
      await api("GET", "/table/get", {
        token: owner.token,
        query: q({ table_id: table.table_id }),
      }),
      404,
      "table_not_found",
    );
    expectError(
      await api("POST", "/field/update", {
        token: owner.token,
        query: q({ field_id: fields[0].field_id }),
        body: { name: "Y" },
      }),
      404,
      "field_not_found",
    );
  });

  it("deleting an organization removes its databases, tables and fields", async () => {
    const org = await createOrg(api, owner);
    const created = await api("POST", "/database/create", {
      token: owner.token,
      query: q({ organization_id: org.organization_id }),
      body: { name: "Doomed" },
    });
    const databaseId = created.body.data.database.database_id;
    await createTable(databaseId, { fields: [{ name: "X", type: "text" }] });
    const db = new pg.Client({ connectionString: sys.databaseUrl });
    await db.connect();
    try {
      const held = async () =>
        (
          await db.query(
            `select (select count(*) from catalog.databases where id = $1)::int
                  + (select count(*) from catalog.tables where database_id = $1)::int as n`,
            [databaseId],
          )
        ).rows[0].n;
      expect(await held()).toBe(2);
      await api("POST", "/organization/delete", {
        token: owner.token,
        query: q({ organization_id: org.organization_id }),
      });
      await expect.poll(held, { timeout: 10_000 }).toBe(0);
    } finally {
      await db.end();
    }
  });
});
