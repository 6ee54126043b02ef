import { spawnSync } from "node:child_process";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import openapiTS, { astToString, type OpenAPI3 } from "openapi-typescript";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import {
  ALL_TYPES_FIELDS,
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * A table's OpenAPI document used the way an integrator uses it: types generated with
 * openapi-typescript, a small openapi-fetch client compiled with `tsc --strict` that reads
 * values with no cast, and run against the gateway on the real services. A misspelt field or
 * choice does not compile.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const NODE_MODULES = join(ROOT, "node_modules");

let sys: TestSystem;
let api: ReturnType<typeof client>;
let tenant: Tenant;
let table: TestTable;
let dir: string;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api);
  table = await createTable(api, tenant, [
    { name: "Name", type: "text", required: true },
    {
      name: "Status",
      type: "single_select",
      options: { choices: [{ name: "Lead" }, { name: "Customer" }] },
    },
    { name: "Score", type: "number", options: { decimals: 1 } },
    { name: "Tags", type: "multi_select", options: { choices: [{ name: "vip" }] } },
  ]);
  // The compiled client imports openapi-fetch as any project would.
  dir = await mkdtemp(join(tmpdir(), "rowbase-client-"));
  await symlink(NODE_MODULES, join(dir, "node_modules"), "dir");
  await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module" }));
}, 60_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  await sys?.stop();
});

/** The table's document, as a code generator fetches it. */
async function tableDocument(format: "ids" | "names", headers: Record<string, string> = {}) {
  return api("GET", v1(tenant.databaseId, table.tableId).openapi, {
    token: tenant.readToken,
    query: { response_format: format },
    headers,
  });
}

/** `tsc --strict` on one file of `dir`; the diagnostics' messages, none when it compiles. */
function compile(file: string): string[] {
  const program = ts.createProgram([join(dir, file)], {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
    types: [],
    skipLibCheck: true,
    noEmitOnError: true,
    outDir: dir,
  });
  const { diagnostics } = program.emit();
  return [...ts.getPreEmitDiagnostics(program), ...diagnostics].map((d) =>
    ts.flattenDiagnosticMessageText(d.messageText, "\n"),
  );
}

/** A client module over the generated `paths`, with `body` inside its `run`. */
function clientModule(body: string): string {
  const base = "/public/v1/databases/{database_id}/tables/{table_id}";
  return `import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Data = components["schemas"];

const RECORDS = "${base}/records" as const;
const RECORD = "${base}/records/{row_id}" as const;
const table = { database_id: ${tenant.databaseId}, table_id: ${table.tableId} } as const;

export async function run(baseUrl: string, token: string) {
  const api = createClient<paths>({ baseUrl, headers: { Authorization: \`Bearer \${token}\` } });
${body}
}
`;
}

describe("a client generated from a table's document", () => {
  it("tells a client its types are stale: info.version and the ETag follow the schema", async () => {
    const first = await tableDocument("names");
    expect(first.status).toBe(200);
    const etag = first.headers.get("etag");
    expect(etag).toMatch(/^"[\w-]+"$/);
    expect(first.body.info.version).toMatch(/^1\.0\.0\+[0-9a-f]{12}$/);

    const unchanged = await tableDocument("names", { "if-none-match": etag! });
    expect(unchanged.status).toBe(304);
    expect(unchanged.text).toBe("");
    expect(unchanged.headers.get("etag")).toBe(etag);
    // The other form is another document, with its own ETag but the same schema version.
    const byIds = await tableDocument("ids", { "if-none-match": etag! });
    expect(byIds.status).toBe(200);
    expect(byIds.headers.get("etag")).not.toBe(etag);
    expect(byIds.body.info.version).toBe(first.body.info.version);

    const added = await api("POST", "/field/create", {
      token: tenant.owner.token,
      query: { table_id: String(table.tableId) },
      body: { name: "Notes", type: "long_text" },
    });
    expect(added.status, added.text).toBe(200);
    const changed = await tableDocument("names", { "if-none-match": etag! });
    expect(changed.status).toBe(200);
    expect(changed.headers.get("etag")).not.toBe(etag);
    expect(changed.body.info.version).not.toBe(first.body.info.version);
    expect(changed.body.components.schemas.RecordDataByName.properties).toHaveProperty("Notes");
  });

  it("describes select fields as enums and every field with an example", async () => {
    const { body: doc } = await tableDocument("names");
    const { schemas } = doc.components;
    for (const name of ["RecordCreateData", "RecordUpdateData"]) {
      const properties = schemas[name].properties;
      expect(properties.Status.enum, name).toEqual(["Lead", "Customer", null]);
      expect(properties.Tags.items.enum, name).toEqual(["vip"]);
    }
    for (const name of ["RecordDataByName", "RecordCreateData", "RecordData"]) {
      for (const [key, value] of Object.entries(schemas[name].properties)) {
        expect((value as { examples?: unknown[] }).examples, `${name}.${key}`).toHaveLength(1);
      }
    }
    // The example record is one the table takes.
    const example = schemas.RecordCreateData.examples[0];
    expect(example).toMatchObject({ Name: "Example", Status: "Lead", Score: 42, Tags: ["vip"] });
    const created = await api("POST", v1(tenant.databaseId, table.tableId).records, {
      token: tenant.writeToken,
      body: { data: example },
    });
    expect(created.status, created.text).toBe(200);
  });

  it("compiles strictly, reads values without a cast, and works against the gateway", async () => {
    const { body: doc } = await tableDocument("names");
    await writeFile(join(dir, "schema.d.ts"), astToString(await openapiTS(doc as OpenAPI3)));
    const nameId = table.id("Name");
    const statusId = table.id("Status");
    await writeFile(
      join(dir, "client.ts"),
      clientModule(`
  const created = await api.POST(RECORDS, {
    params: { path: table },
    body: { data: { Name: "Ada", Status: "Customer", Score: 4.5, Tags: ["vip"] } },
  });
  if (!created.data) throw new Error(JSON.stringify(created.error));
  // Writes answer keyed by field id.
  const record = created.data.data.record;
  const createdName: string | null | undefined = record.data["${nameId}"];
  const row = { ...table, row_id: record.row_id };

  const got = await api.GET(RECORD, {
    params: { path: row, query: { response_format: "names" } },
  });
  if (!got.data) throw new Error(JSON.stringify(got.error));
  const gotName: string | null | undefined = got.data.data.record.data.Name;

  const listed = await api.GET(RECORDS, {
    params: { path: table, query: { response_format: "names", where: "(Status,eq,Customer)" } },
  });
  if (!listed.data) throw new Error(JSON.stringify(listed.error));
  const listedNames = listed.data.data.records.map((r) => r.data.Name);

  const patched = await api.PATCH(RECORD, {
    params: { path: row },
    body: { data: { Status: "Lead", Score: null } },
  });
  if (!patched.data) throw new Error(JSON.stringify(patched.error));
  const patchedStatus = patched.data.data.record.data["${statusId}"];

  const reread = await api.GET(RECORD, {
    params: { path: row, query: { response_format: "names" } },
  });
  const rereadStatus = reread.data?.data.record.data.Status;

  const deleted = await api.DELETE(RECORD, { params: { path: row } });
  if (!deleted.data) throw new Error(JSON.stringify(deleted.error));
  const gone = await api.GET(RECORD, {
    params: { path: row, query: { response_format: "names" } },
  });
  return {
    createdName,
    gotName,
    listedNames,
    patchedStatus,
    rereadStatus,
    deletedId: deleted.data.data.deleted_id,
    rowId: record.row_id,
    goneStatus: gone.response.status,
    goneError: gone.error,
  };`),
    );
    expect(compile("client.ts")).toEqual([]);

    const { run } = (await import(pathToFileURL(join(dir, "client.js")).href)) as {
      run(baseUrl: string, token: string): Promise<Record<string, unknown>>;
    };
    const result = await run(sys.baseUrl, tenant.writeToken);
    expect(result).toEqual({
      createdName: "Ada",
      gotName: "Ada",
      listedNames: ["Ada"],
      patchedStatus: "Lead",
      rereadStatus: "Lead",
      deletedId: result.rowId,
      rowId: expect.any(Number),
      goneStatus: 404,
      goneError: { message: "record_not_found", data: {} },
    });
  });

  it("does not compile with a misspelt field or choice", async () => {
    const { body: doc } = await tableDocument("names");
    await writeFile(join(dir, "schema.d.ts"), astToString(await openapiTS(doc as OpenAPI3)));
    const files = {
      right: `const data: Data["RecordCreateData"] = { Name: "Ada", Status: "Customer" };
  return api.POST(RECORDS, { params: { path: table }, body: { data } });`,
      // openapi-fetch infers its argument, so TypeScript does not flag an extra key written
      // inline beside the required ones (openapi-ts/openapi-typescript#1769); typed data does.
      wrongField: `const data: Data["RecordCreateData"] = { Name: "Ada", Nmae: "Ada" };
  return api.POST(RECORDS, { params: { path: table }, body: { data } });`,
      wrongChoice: `return api.POST(RECORDS, {
    params: { path: table },
    body: { data: { Name: "Ada", Status: "Custmer" } },
  });`,
      wrongRead: `const got = await api.GET(RECORD, {
    params: { path: { ...table, row_id: 1 }, query: { response_format: "names" } },
  });
  return got.data?.data.record.data.Nmae;`,
    };
    const diagnostics: Record<string, string> = {};
    for (const [name, body] of Object.entries(files)) {
      await writeFile(join(dir, `${name}.ts`), clientModule(`  ${body}`));
      diagnostics[name] = compile(`${name}.ts`).join("\n");
    }
    expect(diagnostics.right).toBe("");
    expect(diagnostics.wrongField).toMatch(
      /Object literal may only specify known properties, and 'Nmae' does not exist/,
    );
    expect(diagnostics.wrongChoice).toMatch(
      /Type '"Custmer"' is not assignable to type '"Lead" \| "Customer"/,
    );
    expect(diagnostics.wrongRead).toMatch(/Property 'Nmae' does not exist/);
  });

  it("passes Redocly's lint under the project's rules, in both keyings, for every field type", async () => {
    const every = await createTable(api, tenant, ALL_TYPES_FIELDS);
    for (const format of ["ids", "names"]) {
      const document = await api("GET", v1(tenant.databaseId, every.tableId).openapi, {
        token: tenant.readToken,
        query: { response_format: format },
      });
      expect(document.status).toBe(200);
      // Outside .redocly.lint-ignore.yaml's reach: no warning of a table's document is ignored.
      const file = join(dir, `table-${format}.json`);
      await writeFile(file, JSON.stringify(document.body, null, 2));
      const lint = spawnSync(
        join(NODE_MODULES, ".bin/redocly"),
        ["lint", file, "--config", join(ROOT, "redocly.yaml"), "--format", "stylish"],
        {
          cwd: dir,
          encoding: "utf8",
          env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
        },
      );
      expect(lint.status, `${format}: ${lint.stdout}${lint.stderr}`).toBe(0);
    }
  }, 60_000);
});
