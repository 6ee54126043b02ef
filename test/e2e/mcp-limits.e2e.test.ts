import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { RELAXED_RATE_LIMITS, startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import { createTenant, setPlan, type Tenant } from "./support/records.js";

/**
 * /mcp under the limits of the record routes: each `tools/call` takes one from the token's
 * rate limit and counts as one API call of the plan; `initialize` and `tools/list` do neither.
 */

type Api = ReturnType<typeof client>;

/** Five record-route requests per token an hour: the sixth is refused whatever the clock. */
const TOKEN_CALLS = 5;

let sys: TestSystem;
let api: Api;
const clients: Client[] = [];

beforeAll(async () => {
  sys = await startTestSystem({
    RATE_LIMITS: `${RELAXED_RATE_LIMITS},records_token=${TOKEN_CALLS}/3600,org_write_user=100000/60`,
  });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  for (const mcp of clients) await mcp.close().catch(() => {});
  await sys?.stop();
});

async function connect(token: string): Promise<Client> {
  const mcp = new Client({ name: "rowbase-e2e", version: "1.0.0" });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL("/mcp", sys.baseUrl), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  clients.push(mcp);
  return mcp;
}

async function usage(tenant: Tenant): Promise<number> {
  const response = await api("GET", "/organization/limits", {
    token: tenant.owner.token,
    query: q({ organization_id: tenant.orgId }),
  });
  expect(response.status).toBe(200);
  return response.body.data.usage.api_calls_this_month ?? 0;
}

const listDatabases = { name: "list_databases", arguments: {} };

describe("/mcp limits", () => {
  it("takes one from the token's rate limit per tool call, none for initialize and tools/list", async () => {
    const tenant = await createTenant(sys, api);
    const mcp = await connect(tenant.readToken);
    for (let i = 0; i < TOKEN_CALLS * 2; i++) await mcp.listTools();
    for (let i = 0; i < TOKEN_CALLS; i++) {
      const result = (await mcp.callTool(listDatabases)) as CallToolResult;
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    }
    await expect(mcp.callTool(listDatabases)).rejects.toMatchObject({ code: 429 });
    const refused = await api("POST", "/mcp", {
      token: tenant.readToken,
      headers: { accept: "application/json, text/event-stream" },
      body: { jsonrpc: "2.0", id: 7, method: "tools/call", params: listDatabases },
    });
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ message: "too_many_requests", data: {} });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    // Listing still answers: it is not a call.
    expect((await mcp.listTools()).tools.length).toBeGreaterThan(0);
    // Another token of the organization has its own limit.
    const other = await connect(tenant.writeToken);
    expect(((await other.callTool(listDatabases)) as CallToolResult).isError).toBeFalsy();
  });

  it("counts each tool call as an API call of the plan, and refuses past the allowance", async () => {
    const tenant = await createTenant(sys, api);
    await setPlan(
      sys,
      tenant.orgId,
      "enterprise",
      "--records=1000",
      "--api-calls-per-month=3",
      "--file-storage-bytes=100000000",
      "--transfer-bytes-per-month=1000000000",
      "--members=3",
      "--max-file-bytes=10000000",
    );
    const mcp = await connect(tenant.writeToken);
    await mcp.listTools();
    expect(await usage(tenant)).toBe(0);
    for (let i = 0; i < 3; i++) {
      const result = (await mcp.callTool(listDatabases)) as CallToolResult;
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    }
    const refused = (await mcp.callTool(listDatabases)) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect((refused.content[0] as { text: string }).text).toContain("api_call_limit_exceeded");
    await expect.poll(() => usage(tenant), { timeout: 10_000 }).toBe(3);
  });
});
