import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import {
  createTable,
  createTenant,
  list,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * CORS_ALLOWED_ORIGINS through the gateway on the real services: preflights and answers to an
 * allowed origin carry the CORS headers, a refused origin gets none, and a page served on
 * another loopback port calls the API from Debian's Chromium (headless, through playwright-core;
 * it reaches nothing but loopback).
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const EXPOSED = "X-Request-Id,Retry-After,RateLimit,RateLimit-Policy";

let sys: TestSystem;
let api: ReturnType<typeof client>;
let browser: Browser;
let tenant: Tenant;
let table: TestTable;
/** Two pages on other loopback ports: the first origin is allowed, the second is not. */
let allowedSite: Site;
let refusedSite: Site;

interface Site {
  origin: string;
  server: Server;
}

/** An empty HTML page on a loopback port of its own: the origin a browser test runs from. */
async function site(): Promise<Site> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>integration</title><p>An integration's page.</p>");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

beforeAll(async () => {
  [allowedSite, refusedSite] = await Promise.all([site(), site()]);
  sys = await startTestSystem({
    RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
    CORS_ALLOWED_ORIGINS: `https://app.example.com, ${allowedSite.origin}`,
  });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api);
  table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  await sys?.stop();
  for (const s of [allowedSite, refusedSite]) s?.server.close();
});

/** The CORS headers of an answer (and Vary), by name. */
function corsHeaders(headers: Headers): Record<string, string> {
  return Object.fromEntries(
    [...headers.entries()].filter(([name]) => name.startsWith("access-control-")),
  );
}

function preflight(origin: string, method: string, requestHeaders: string) {
  return fetch(new URL(v1(table.databaseId, table.tableId).records, sys.baseUrl), {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": requestHeaders,
    },
  });
}

describe("CORS", () => {
  it("answers an allowed origin's preflight with the methods and headers, no credentials", async () => {
    for (const origin of ["https://app.example.com", allowedSite.origin]) {
      const response = await preflight(origin, "POST", "authorization,content-type");
      expect(response.status).toBe(204);
      expect(corsHeaders(response.headers)).toEqual({
        "access-control-allow-origin": origin,
        "access-control-allow-methods": "GET,HEAD,POST,PUT,PATCH,DELETE",
        "access-control-allow-headers":
          "Authorization,Content-Type,X-Request-Id,Mcp-Protocol-Version",
        "access-control-max-age": "600",
      });
      expect(response.headers.get("vary")).toContain("Origin");
    }
  });

  it("gives a refused origin's preflight no CORS header at all", async () => {
    for (const origin of [
      refusedSite.origin,
      "https://app.example.com.evil.test",
      "http://app.example.com",
      "null",
    ]) {
      const response = await preflight(origin, "POST", "authorization,content-type");
      expect(corsHeaders(response.headers)).toEqual({});
    }
  });

  it("exposes the headers on answers to an allowed origin, errors included, and none to others", async () => {
    const path = v1(table.databaseId, table.tableId).records;
    const allowed = await api("GET", path, {
      token: tenant.readToken,
      headers: { origin: allowedSite.origin },
    });
    expect(allowed.status).toBe(200);
    expect(corsHeaders(allowed.headers)).toEqual({
      "access-control-allow-origin": allowedSite.origin,
      "access-control-expose-headers": EXPOSED,
    });
    const refusedCredential = await api("GET", path, {
      token: `rb_${"Q".repeat(40)}`,
      headers: { origin: allowedSite.origin },
    });
    expect(refusedCredential.status).toBe(401);
    expect(corsHeaders(refusedCredential.headers)).toEqual({
      "access-control-allow-origin": allowedSite.origin,
      "access-control-expose-headers": EXPOSED,
    });
    for (const headers of [{ origin: refusedSite.origin }, {}] as Record<string, string>[]) {
      const refused = await api("GET", path, { token: tenant.readToken, headers });
      // The answer itself is the same; only a browser keeps it from the refused page.
      expect(refused.status).toBe(200);
      expect(corsHeaders(refused.headers)).toEqual({});
    }
  });

  it("lets a page on an allowed origin call the API from Chromium, and keeps others out", async () => {
    const base = sys.baseUrl;
    const paths = v1(table.databaseId, table.tableId);
    const page = await browser.newPage();
    const outside: string[] = [];
    page.on("request", (request) => {
      const url = new URL(request.url());
      if (url.hostname !== "127.0.0.1") outside.push(request.url());
    });

    await page.goto(`${allowedSite.origin}/`);
    // A write with a JSON body and a bearer token: the browser sends a preflight first.
    const created = await page.evaluate(
      async ({ url, token }) => {
        const response = await fetch(url, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ data: { Name: "from the browser" } }),
        });
        return {
          status: response.status,
          requestId: response.headers.get("x-request-id"),
          body: (await response.json()) as { data: { record?: { row_id?: unknown } } },
        };
      },
      { url: `${base}${paths.records}`, token: tenant.writeToken },
    );
    expect(created.status).toBe(200);
    expect(created.requestId).toMatch(/.+/);
    expect(created.body.data.record?.row_id).toEqual(expect.any(Number));
    // And the schema, read with the same kind of credential.
    const fields = await page.evaluate(
      async ({ url, token }) => {
        const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
        const body = (await response.json()) as { data: { fields: { name: string }[] } };
        return { status: response.status, body };
      },
      { url: `${base}/field/list?table_id=${table.tableId}`, token: tenant.readToken },
    );
    expect(fields.status).toBe(200);
    expect(fields.body.data.fields.map((field) => field.name)).toEqual(["Name"]);
    // And /mcp, with the headers an MCP client sends once it has initialized.
    const tools = await page.evaluate(
      async ({ url, token }) => {
        const response = await fetch(url, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            "mcp-protocol-version": "2025-06-18",
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
        });
        const body = (await response.json()) as { result?: { tools: { name: string }[] } };
        return { status: response.status, names: body.result?.tools.map((tool) => tool.name) };
      },
      { url: `${base}/mcp`, token: tenant.readToken },
    );
    expect(tools.status).toBe(200);
    expect(tools.names).toContain("list_records");

    await page.goto(`${refusedSite.origin}/`);
    const refused = await page.evaluate(
      async ({ url, token }) => {
        try {
          await fetch(url, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ data: { Name: "from a refused origin" } }),
          });
          return "answered";
        } catch (error) {
          return (error as Error).name;
        }
      },
      { url: `${base}${paths.records}`, token: tenant.writeToken },
    );
    expect(refused).toBe("TypeError");
    await page.close();
    expect(outside).toEqual([]);

    // The refused page's preflight failed, so its write never happened.
    const records = await list(api, tenant.readToken, table, { response_format: "names" });
    expect(records.records.map((record) => record.data.Name)).toEqual(["from the browser"]);
  });
});
