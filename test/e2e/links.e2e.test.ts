import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { expectError, q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  expectValidation,
  type Field,
  list,
  RECORD_TEST_RATE_LIMITS,
  type RecordShape,
  seed,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * Links, lookups and rollups through the gateway on the running services: customers and their
 * orders, as docs/links.md shows them.
 */

type Api = ReturnType<typeof client>;

let sys: TestSystem;
let api: Api;
let tenant: Tenant;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api, { plan: "business" });
});

afterAll(async () => {
  await sys?.stop();
});

async function createField(table: TestTable, body: Record<string, unknown>) {
  return api("POST", "/field/create", {
    token: tenant.owner.token,
    query: q({ table_id: table.tableId }),
    body,
  });
}

async function field(table: TestTable, body: Record<string, unknown>): Promise<Field> {
  const response = await createField(table, body);
  expect(response.status, response.text).toBe(200);
  return response.body.data.field as Field;
}

async function fieldsOf(table: TestTable, token = tenant.owner.token): Promise<Field[]> {
  const response = await api("GET", "/field/list", {
    token,
    query: q({ table_id: table.tableId }),
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data.fields as Field[];
}

async function get(table: TestTable, rowId: number): Promise<RecordShape> {
  const response = await api("GET", `${v1(table.databaseId, table.tableId).record(rowId)}`, {
    token: tenant.readToken,
    query: q({ response_format: "names" }),
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data.record as RecordShape;
}

async function patch(table: TestTable, rowId: number, data: Record<string, unknown>) {
  return api("PATCH", v1(table.databaseId, table.tableId).record(rowId), {
    token: tenant.writeToken,
    body: { data },
  });
}

/** Customers and orders, an order linked to at most one customer. */
async function shop() {
  const customers = await createTable(api, tenant, [
    { name: "Name", type: "text" },
    { name: "City", type: "text" },
  ]);
  const orders = await createTable(api, tenant, [
    { name: "Item", type: "text" },
    { name: "Amount", type: "number", options: { decimals: 2 } },
  ]);
  const customer = await field(orders, {
    name: "Customer",
    type: "link",
    options: { table_id: customers.tableId, multiple: false },
  });
  const people = await seed(api, tenant.writeToken, customers, [
    { Name: "Ada", City: "London" },
    { Name: "Grace", City: "Arlington" },
    { Name: "", City: "Nowhere" },
  ]);
  return { customers, orders, customer, people };
}

describe("link fields", () => {
  it("create their inverse in the linked table, named after the linking table", async () => {
    const { customers, orders, customer } = await shop();
    const inverse = (await fieldsOf(customers)).find((f) => f.type === "link");
    expect(inverse).toMatchObject({
      table_id: customers.tableId,
      type: "link",
      required: false,
      options: { table_id: orders.tableId, multiple: true, inverse_field_id: customer.field_id },
    });
    expect(customer.options).toEqual({
      table_id: customers.tableId,
      multiple: false,
      inverse_field_id: inverse!.field_id,
    });
  });

  it("show a write on one side on the other at once, with each record's primary value", async () => {
    const { customers, orders, customer, people } = await shop();
    const [ada, grace, nameless] = people as [RecordShape, RecordShape, RecordShape];
    const link = String(customer.field_id);
    const [first, second] = await seed(api, tenant.writeToken, orders, [
      { Item: "Tea", Amount: 4.5, Customer: [ada.row_id] },
      { Item: "Cake", Amount: 3, Customer: [{ row_id: nameless.row_id }] },
    ]);
    expect(first!.data[link]).toEqual([{ row_id: ada.row_id, display: "Ada" }]);
    // No primary value: the row id as text.
    expect(second!.data[link]).toEqual([
      { row_id: nameless.row_id, display: String(nameless.row_id) },
    ]);
    const inverseName = (await fieldsOf(customers)).find((f) => f.type === "link")!.name;
    expect((await get(customers, ada.row_id)).data[inverseName]).toEqual([
      { row_id: first!.row_id, display: "Tea" },
    ]);
    expect((await get(customers, grace.row_id)).data[inverseName]).toEqual([]);

    // Written from the other side, it shows on the orders' side.
    const moved = await patch(customers, grace.row_id, {
      [inverseName]: [first!.row_id, second!.row_id],
    });
    expect(moved.status, moved.text).toBe(400); // `second` already has its one customer
    const linked = await patch(customers, grace.row_id, { [inverseName]: [first!.row_id] });
    expect(linked.status, linked.text).toBe(400); // so has `first`
    const freed = await patch(orders, first!.row_id, { Customer: [] });
    expect(freed.status, freed.text).toBe(200);
    const taken = await patch(customers, grace.row_id, { [inverseName]: [first!.row_id] });
    expect(taken.status, taken.text).toBe(200);
    expect((await get(orders, first!.row_id)).data.Customer).toEqual([
      { row_id: grace.row_id, display: "Grace" },
    ]);
    expect((await get(customers, ada.row_id)).data[inverseName]).toEqual([]);
  });

  it("refuse ids that are not the linked table's live rows, changing nothing", async () => {
    const { customers, orders, people } = await shop();
    const [ada] = people as [RecordShape];
    const [order] = await seed(api, tenant.writeToken, orders, [
      { Item: "Tea", Customer: [ada.row_id] },
    ]);
    const [otherOrder] = await seed(api, tenant.writeToken, orders, [{ Item: "Scone" }]);
    const [gone] = await seed(api, tenant.writeToken, customers, [{ Name: "Gone" }]);
    const removed = await api(
      "DELETE",
      v1(customers.databaseId, customers.tableId).record(gone!.row_id),
      {
        token: tenant.writeToken,
      },
    );
    expect(removed.status).toBe(200);
    for (const value of [
      [otherOrder!.row_id],
      [gone!.row_id],
      [2 ** 52],
      [ada.row_id, ada.row_id + 1e9],
    ]) {
      const refused = await patch(orders, order!.row_id, { Customer: value, Item: "changed" });
      expectValidation(refused, [{ key: "Customer", source: "body" }]);
    }
    expectValidation(await patch(orders, order!.row_id, { Customer: "x" }), [
      { key: "Customer", source: "body" },
    ]);
    const kept = await get(orders, order!.row_id);
    expect(kept.data).toMatchObject({
      Item: "Tea",
      Customer: [{ row_id: ada.row_id, display: "Ada" }],
    });
  });

  it("unlink a deleted record everywhere, and go with their inverse when deleted", async () => {
    const { customers, orders, customer, people } = await shop();
    const [ada] = people as [RecordShape];
    const [order] = await seed(api, tenant.writeToken, orders, [
      { Item: "Tea", Customer: [ada.row_id] },
    ]);
    const deleted = await api(
      "DELETE",
      v1(customers.databaseId, customers.tableId).record(ada.row_id),
      {
        token: tenant.writeToken,
      },
    );
    expect(deleted.status).toBe(200);
    expect((await get(orders, order!.row_id)).data.Customer).toEqual([]);

    const dropped = await api("POST", "/field/delete", {
      token: tenant.owner.token,
      query: q({ field_id: customer.field_id }),
    });
    expect(dropped.status, dropped.text).toBe(200);
    expect((await fieldsOf(customers)).some((f) => f.type === "link")).toBe(false);
    expect((await get(orders, order!.row_id)).data).toEqual({ Item: "Tea", Amount: null });
  });

  it("refuse a target outside the database, the same way whatever it is", async () => {
    const { orders } = await shop();
    const other = await createTenant(sys, api);
    const elsewhere = await createTable(api, other, [{ name: "Name", type: "text" }]);
    const answers = [];
    for (const tableId of [elsewhere.tableId, 987_654_321]) {
      const response = await createField(orders, {
        name: `Link ${tableId}`,
        type: "link",
        options: { table_id: tableId },
      });
      expect(response.status, response.text).toBe(400);
      answers.push(response.body);
    }
    expect(answers[0]).toEqual(answers[1]);
    expect((await fieldsOf(orders)).map((f) => f.name)).toEqual(["Item", "Amount", "Customer"]);
    expect((await fieldsOf(elsewhere, other.owner.token)).map((f) => f.name)).toEqual(["Name"]);
  });

  it("cannot change into or out of a link", async () => {
    const { orders, customer } = await shop();
    expectError(
      await api("POST", "/field/update", {
        token: tenant.owner.token,
        query: q({ field_id: customer.field_id }),
        body: { type: "text" },
      }),
      400,
      "field_type_change_invalid",
    );
    expectError(
      await api("POST", "/field/update", {
        token: tenant.owner.token,
        query: q({ field_id: orders.f.Item!.field_id }),
        body: { type: "link" },
      }),
      400,
      "field_type_change_invalid",
    );
  });
});

describe("lookups and rollups", () => {
  it("follow the link at read time, filter with has/hasnot and sort by their value", async () => {
    const { customers, orders, customer, people } = await shop();
    const [ada, grace, nameless] = people as [RecordShape, RecordShape, RecordShape];
    const inverse = (await fieldsOf(customers)).find((f) => f.type === "link")!;
    await field(customers, {
      name: "Items",
      type: "lookup",
      options: { link_field_id: inverse.field_id, field_id: orders.f.Item!.field_id },
    });
    await field(customers, {
      name: "Spent",
      type: "rollup",
      options: {
        link_field_id: inverse.field_id,
        field_id: orders.f.Amount!.field_id,
        function: "sum",
      },
    });
    await field(customers, {
      name: "Orders count",
      type: "rollup",
      options: {
        link_field_id: inverse.field_id,
        field_id: orders.f.Amount!.field_id,
        function: "count",
      },
    });
    const [tea] = await seed(api, tenant.writeToken, orders, [
      { Item: "Tea", Amount: 4.5, Customer: [ada.row_id] },
      { Item: "Cake", Amount: 3, Customer: [ada.row_id] },
      { Item: "Pie", Amount: 10, Customer: [grace.row_id] },
    ]);
    const byName = async (query: Record<string, string>) =>
      (await list(api, tenant.readToken, customers, query)).records.map((r) => r.data.Name);

    expect((await get(customers, ada.row_id)).data).toMatchObject({
      Items: ["Tea", "Cake"],
      Spent: 7.5,
      "Orders count": 2,
    });
    expect((await get(customers, nameless.row_id)).data).toMatchObject({
      Items: [],
      Spent: 0,
      "Orders count": 0,
    });
    // A page that shows a rollup and a lookup without their link still follows it.
    const shown = await list(api, tenant.readToken, customers, { fields: "Name,Spent,Items" });
    expect(shown.records[0]!.data).toEqual({ Name: "Ada", Spent: 7.5, Items: ["Tea", "Cake"] });
    expect(await byName({ sort: "-Spent" })).toEqual(["Grace", "Ada", ""]);
    expect(await byName({ sort: `-${inverse.name},Name` })).toEqual(["Ada", "Grace", ""]);
    expect(await byName({ where: `(${inverse.name},has,${tea!.row_id})` })).toEqual(["Ada"]);
    expect(await byName({ where: `(${inverse.name},hasnot,${tea!.row_id})` })).toEqual([
      "Grace",
      "",
    ]);
    expect(await byName({ where: `(${inverse.name},blank)` })).toEqual([""]);
    expect(await byName({ where: "(Items,eq,Pie)" })).toEqual(["Grace"]);
    expect(await byName({ where: "(Items,neq,Pie)" })).toEqual(["Ada", ""]);
    expect(await byName({ where: "(Spent,gt,5)" })).toEqual(["Ada", "Grace"]);

    // A change on the linked side shows in the next read.
    const changed = await patch(orders, tea!.row_id, { Amount: 100 });
    expect(changed.status).toBe(200);
    expect((await get(customers, ada.row_id)).data.Spent).toBe(103);

    // Deleting the link deletes what follows it.
    const dropped = await api("POST", "/field/delete", {
      token: tenant.owner.token,
      query: q({ field_id: customer.field_id }),
    });
    expect(dropped.status, dropped.text).toBe(200);
    expect((await fieldsOf(customers)).map((f) => f.name)).toEqual(["Name", "City"]);
  });

  it("are read-only, and refuse a field that is not the link's table's", async () => {
    const { customers, orders } = await shop();
    const inverse = (await fieldsOf(customers)).find((f) => f.type === "link")!;
    const lookup = await field(customers, {
      name: "Items",
      type: "lookup",
      options: { link_field_id: inverse.field_id, field_id: orders.f.Item!.field_id },
    });
    const [ada] = (await list(api, tenant.readToken, customers)).records as [RecordShape];
    expectValidation(await patch(customers, ada.row_id, { Items: ["x"] }), [
      { key: "Items", source: "body" },
    ]);
    const wrong = await createField(customers, {
      name: "Bad",
      type: "lookup",
      options: { link_field_id: inverse.field_id, field_id: customers.f.City!.field_id },
    });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({
      message: "invalid_field_options",
      data: { errors: [{ key: "options.field_id", message: expect.any(String) }] },
    });
    expect(lookup.type).toBe("lookup");
  });
});
