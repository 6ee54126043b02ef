import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, screenshotPath } from "./support/browser.js";
import { client } from "./support/http.js";
import { createTable, createTenant, RECORD_TEST_RATE_LIMITS, v1 } from "./support/records.js";

/**
 * A table's docs page (`/docs/tables/{table_id}`) in a real browser: Debian's Chromium,
 * headless, driven through playwright-core, against the gateway on the real services. The
 * browser reaches nothing but the loopback gateway. Its screenshot is the README's with
 * UPDATE_SCREENSHOTS=1 (support/browser.ts).
 */

const SCREENSHOT = screenshotPath("table-docs.png");

let sys: TestSystem;
let api: ReturnType<typeof client>;
let browser: Browser;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await sys?.stop();
});

describe("a table's docs page in Chromium", () => {
  it("asks for a token, shows the table's own fields and routes, and tries a call", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [
      { name: "Company", type: "text", required: true },
      {
        name: "Stage",
        type: "single_select",
        options: { choices: [{ name: "Lead" }, { name: "Customer" }, { name: "Lost" }] },
      },
      { name: "Deal size", type: "number", options: { decimals: 2 } },
      { name: "Contact email", type: "email" },
      { name: "Created", type: "created_at" },
    ]);
    const renamed = await api("POST", "/table/update", {
      token: tenant.owner.token,
      query: { table_id: String(table.tableId) },
      body: { name: "Customers" },
    });
    expect(renamed.status, renamed.text).toBe(200);
    const created = await api("POST", v1(tenant.databaseId, table.tableId).records, {
      token: tenant.writeToken,
      body: { data: { Company: "Analytical Engines Ltd", Stage: "Customer", "Deal size": 1200 } },
    });
    expect(created.status, created.text).toBe(200);
    const rowId = created.body.data.record.row_id as number;

    const page = await browser.newPage({ viewport: { width: 1200, height: 1500 } });
    const outside: string[] = [];
    const sent: { url: string; authorization?: string }[] = [];
    page.on("request", (request) => {
      if (!request.url().startsWith(sys.baseUrl)) outside.push(request.url());
      sent.push({ url: request.url(), authorization: request.headers().authorization });
    });
    const response = await page.goto(`${sys.baseUrl}/docs/tables/${table.tableId}`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()["content-security-policy"]).toContain("script-src 'self'");
    expect(await page.title()).toBe("Rowbase table API");

    // A session token of a member (an API token of the organization works the same way once
    // it may read the schema with /table/get).
    const token = tenant.owner.token;
    await page.getByLabel("Token").fill(token);
    await page.getByRole("button", { name: "Show the API" }).click();
    await expect
      .poll(() => page.getByRole("status").textContent())
      .toContain("Showing table Customers");
    expect(await page.locator(".summary h2").textContent()).toBe("Customers");

    // The table's own fields, with their types, choices, what a write must send and examples.
    const fields = page.locator("table.fields tbody tr");
    expect(await fields.allInnerTexts()).toEqual([
      expect.stringMatching(/^Company\t\d+\ttext\trequired\t"Example"$/),
      expect.stringMatching(/^Stage\t\d+\tsingle_select: Lead, Customer, Lost\toptional\t"Lead"$/),
      expect.stringMatching(/^Deal size\t\d+\tnumber\toptional\t42$/),
      expect.stringMatching(/^Contact email\t\d+\temail\toptional\t"ada@example.com"$/),
      expect.stringMatching(/^Created\t\d+\tcreated_at\tread-only\t"2026-01-15T09:30:00.000Z"$/),
    ]);
    // Each route with its example request, curl and fetch snippets (never the token itself).
    const create = page.locator("#route-create");
    expect(JSON.parse(await create.locator("textarea").inputValue())).toEqual({
      data: {
        Company: "Example",
        Stage: "Lead",
        "Deal size": 42,
        "Contact email": "ada@example.com",
      },
    });
    // Snippets name the gateway's public base URL, the document's server.
    const doc = await api("GET", v1(tenant.databaseId, table.tableId).openapi, {
      token: tenant.readToken,
    });
    const records = `${doc.body.servers[0].url}${v1(tenant.databaseId, table.tableId).records}`;
    expect(await create.locator("pre.curl").textContent()).toContain(
      `curl -X POST '${records}' \\\n  -H "Authorization: Bearer $ROWBASE_TOKEN"`,
    );
    expect(await create.locator("pre.js").textContent()).toContain(
      `const response = await fetch("${records}", {\n  method: "POST",`,
    );
    expect(await page.locator("main").textContent()).not.toContain(token);

    // Try it: list, then get the record by its id, keyed by field names.
    await page.locator("#route-list").getByRole("button", { name: "Try it" }).click();
    await expect
      .poll(() => page.locator("#route-list pre.result").textContent())
      .toContain('"Company": "Analytical Engines Ltd"');
    const get = page.locator("#route-get");
    await get.getByLabel("row_id").fill(String(rowId));
    expect(await get.locator("pre.curl").textContent()).toContain(
      `${records}/${rowId}?response_format=names'`,
    );
    await get.getByRole("button", { name: "Try it" }).click();
    await expect.poll(() => get.locator("pre.result").textContent()).toMatch(/^200\n/);
    const answer = JSON.parse(((await get.locator("pre.result").textContent()) ?? "").slice(4));
    expect(answer.data.record).toMatchObject({
      row_id: rowId,
      data: { Company: "Analytical Engines Ltd", Stage: "Customer", "Deal size": 1200 },
    });

    await page.evaluate("window.scrollTo(0, 0)");
    await page.screenshot({ path: SCREENSHOT });

    // The token was sent in the Authorization header only, and kept nowhere but the page.
    const calls = sent.filter((s) => !s.url.includes("/docs/"));
    expect(calls.map((s) => new URL(s.url).pathname)).toEqual([
      "/table/get",
      `/public/v1/databases/${tenant.databaseId}/tables/${table.tableId}/openapi.json`,
      `/public/v1/databases/${tenant.databaseId}/tables/${table.tableId}/records`,
      `/public/v1/databases/${tenant.databaseId}/tables/${table.tableId}/records/${rowId}`,
    ]);
    for (const call of calls) expect(call.authorization).toBe(`Bearer ${token}`);
    expect(sent.every((s) => !s.url.includes(token))).toBe(true);
    expect(await page.getByLabel("Token").inputValue()).toBe("");
    expect(
      await page.evaluate("[localStorage.length, sessionStorage.length, document.cookie]"),
    ).toEqual([0, 0, ""]);
    expect(outside).toEqual([]);

    // Forgetting it empties the page; a try-it without a token sends nothing.
    await page.getByRole("button", { name: "Forget the token" }).click();
    expect(await page.locator("main").textContent()).toBe("");
    await page.close();
  });

  it("says why when the token is refused, and has no page for a bad id", async () => {
    const page = await browser.newPage();
    await page.goto(`${sys.baseUrl}/docs/tables/1`);
    await page.getByLabel("Token").fill("rb_0000000000000000000000000000000000000000");
    await page.getByRole("button", { name: "Show the API" }).click();
    await expect
      .poll(() => page.getByRole("status").textContent())
      .toMatch(/^Could not load the table: the token was not accepted on \/table\/get \(401/);
    expect(await page.locator("main").textContent()).toBe("");
    await page.close();
    for (const bad of ["0", "abc", "1.5", "99999999999999999"]) {
      const answer = await api("GET", `/docs/tables/${bad}`);
      expect(answer.status, bad).toBe(404);
      expect(answer.body).toEqual({ message: "not_found", data: {} });
    }
  });
});
