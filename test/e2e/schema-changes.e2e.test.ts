import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  seed,
  type Tenant,
  v1,
} from "./support/records.js";

/**
 * A schema change reaches the records before its route answers: the client's very next read
 * shows the values converted, the choices renamed, the field's values gone. (Records used to
 * apply catalog's events only as the bus delivered them, so a read right after the change could
 * still show the old text "42" for tens of milliseconds.)
 */

let sys: TestSystem;
let api: ReturnType<typeof client>;
let tenant: Tenant;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api, { plan: "business" });
});

afterAll(async () => {
  await sys?.stop();
});

async function updateField(fieldId: number, body: Record<string, unknown>) {
  const response = await api("POST", "/field/update", {
    token: tenant.owner.token,
    query: q({ field_id: fieldId }),
    body,
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data.field;
}

describe("a schema change and the next read", () => {
  it("shows a text field changed to number as numbers at once, every time", async () => {
    for (let attempt = 0; attempt < 5; attempt++) {
      const table = await createTable(api, tenant, [{ name: "Amount", type: "text" }]);
      const [record] = await seed(api, tenant.writeToken, table, [{ Amount: "42" }]);
      await updateField(table.f.Amount!.field_id, { type: "number" });
      const read = await api("GET", v1(table.databaseId, table.tableId).record(record!.row_id), {
        token: tenant.readToken,
      });
      expect(read.status).toBe(200);
      expect(read.body.data.record.data).toEqual({ [table.id("Amount")]: 42 });
    }
  });

  it("reads and lists a converted field on connections that read it before the change", async () => {
    const table = await createTable(api, tenant, [{ name: "Amount", type: "text" }]);
    const [record] = await seed(api, tenant.writeToken, table, [{ Amount: "42" }]);
    const routes = v1(table.databaseId, table.tableId);
    const readAll = () =>
      Promise.all(
        Array.from({ length: 24 }, (_, n) =>
          api("GET", n % 2 ? routes.record(record!.row_id) : routes.records, {
            token: tenant.readToken,
          }),
        ),
      );
    // Parallel reads use many of the pool's connections, each preparing the table's statements.
    for (const read of await readAll()) expect(read.status).toBe(200);
    await updateField(table.f.Amount!.field_id, { type: "number" });
    for (const read of await readAll()) {
      expect(read.status, JSON.stringify(read.body)).toBe(200);
      const data = read.body.data.record?.data ?? read.body.data.records[0].data;
      expect(data).toEqual({ [table.id("Amount")]: 42 });
    }
  });

  it("shows renamed choices and a deleted field's values gone at once", async () => {
    const table = await createTable(api, tenant, [
      { name: "Status", type: "single_select", options: { choices: [{ name: "Open" }] } },
      { name: "Note", type: "text" },
    ]);
    const [record] = await seed(api, tenant.writeToken, table, [{ Status: "Open", Note: "n" }]);
    const field = table.f.Status!;
    const [open] = (field.options as { choices: { id: string }[] }).choices;
    await updateField(field.field_id, { options: { choices: [{ id: open!.id, name: "Doing" }] } });
    const path = v1(table.databaseId, table.tableId).record(record!.row_id);
    const renamed = await api("GET", path, { token: tenant.readToken });
    expect(renamed.body.data.record.data[table.id("Status")]).toBe("Doing");

    const deleted = await api("POST", "/field/delete", {
      token: tenant.owner.token,
      query: q({ field_id: table.f.Note!.field_id }),
    });
    expect(deleted.status).toBe(200);
    const after = await api("GET", path, { token: tenant.readToken });
    expect(after.body.data.record.data).toEqual({ [table.id("Status")]: "Doing" });
  });
});
