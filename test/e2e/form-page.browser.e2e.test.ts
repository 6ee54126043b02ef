import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, screenshotPath } from "./support/browser.js";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * A form's page in a real browser: Debian's Chromium, headless, driven through playwright-core,
 * against the gateway on the real services. The browser reaches nothing but the loopback
 * gateway. Its screenshot is the README's with UPDATE_SCREENSHOTS=1 (support/browser.ts).
 */

const SCREENSHOT = screenshotPath("form-page.png");

let sys: TestSystem;
let api: ReturnType<typeof client>;
let browser: Browser;

beforeAll(async () => {
  sys = await startTestSystem({
    RATE_LIMITS: `${RECORD_TEST_RATE_LIMITS},form_submit_ip=100000/60`,
  });
  api = client(sys.baseUrl);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await sys?.stop();
});

async function createForm(tenant: Tenant, table: TestTable, body: Record<string, unknown>) {
  const response = await api("POST", "/form/create", {
    token: tenant.owner.token,
    query: q({ table_id: table.tableId }),
    body,
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data.form as { form_id: number; form_key: string };
}

describe("a form's page in Chromium", () => {
  it("fills every field type, submits, thanks, and the record reads back typed", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [
      { name: "Full name", type: "text", description: "As you would like us to address you." },
      { name: "Work email", type: "email" },
      { name: "Company website", type: "url" },
      { name: "Phone", type: "phone" },
      { name: "Team size", type: "number", options: { decimals: 0 } },
      { name: "Preferred start", type: "date" },
      { name: "Call me at", type: "datetime" },
      {
        name: "Plan",
        type: "single_select",
        options: { choices: [{ name: "Starter" }, { name: "Growth" }, { name: "Enterprise" }] },
      },
      {
        name: "Interested in",
        type: "multi_select",
        options: { choices: [{ name: "API" }, { name: "Forms" }, { name: "Automations" }] },
      },
      { name: "How can we help?", type: "long_text" },
      { name: "Send me product news", type: "boolean" },
    ]);
    const form = await createForm(tenant, table, {
      name: "Request a demo",
      fields: table.fields.map((field) => field.field_id),
      required: ["Full name", "Work email"],
      success_message: "Thanks! Our team will contact you within one business day.",
    });

    const page = await browser.newPage({ viewport: { width: 720, height: 1400 } });
    const outside: string[] = [];
    page.on("request", (request) => {
      if (!request.url().startsWith(sys.baseUrl)) outside.push(request.url());
    });
    await page.goto(`${sys.baseUrl}/forms/${form.form_key}`);
    expect(await page.title()).toBe("Request a demo");
    // Every control is found by its label, as a screen reader announces it.
    await page.getByLabel("Full name").fill("Ada Lovelace");
    await page.getByLabel("Work email").fill("ada@example.com");
    await page.getByLabel("Company website").fill("https://analytical.example");
    await page.getByLabel("Phone").fill("+44 20 7946 0000");
    await page.getByLabel("Team size").fill("12");
    await page.getByLabel("Preferred start").fill("2027-01-15");
    await page.getByLabel("Call me at").fill("2027-01-10T14:30");
    await page.getByLabel("Plan").selectOption("Growth");
    await page.getByLabel("API").check();
    await page.getByLabel("Automations").check();
    await page.getByLabel("How can we help?").fill("We collect leads from three sites.");
    await page.getByLabel("Send me product news").check();
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    // On a phone's width the page still reads without zooming or scrolling sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
    await page.screenshot({ path: SCREENSHOT.replace(".png", "-phone.png") });
    await page.setViewportSize({ width: 720, height: 1400 });

    await Promise.all([
      page.waitForURL(/\/submit$/),
      page.getByRole("button", { name: "Submit" }).click(),
    ]);
    expect(await page.getByRole("status").textContent()).toContain("Our team will contact you");
    expect(outside).toEqual([]);

    const listed = await api("GET", v1(table.databaseId, table.tableId).records, {
      token: tenant.readToken,
      query: q({ response_format: "names" }),
    });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.records).toHaveLength(1);
    expect(listed.body.data.records[0].data).toEqual({
      "Full name": "Ada Lovelace",
      "Work email": "ada@example.com",
      "Company website": "https://analytical.example",
      Phone: "+44 20 7946 0000",
      "Team size": 12,
      "Preferred start": "2027-01-15",
      "Call me at": "2027-01-10T14:30:00.000Z",
      Plan: "Growth",
      "Interested in": ["API", "Automations"],
      "How can we help?": "We collect leads from three sites.",
      "Send me product news": true,
    });
    await page.close();
  });

  it("lands on the form's redirect_url after a submission", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Email", type: "email" }]);
    // The redirect target is the gateway itself (loopback), so the browser stays on this machine.
    const target = `${sys.baseUrl}/health?from=form`;
    const form = await createForm(tenant, table, {
      name: "Newsletter",
      fields: ["Email"],
      redirect_url: target.replace("127.0.0.1", "localhost"),
    });
    const page = await browser.newPage();
    await page.goto(`${sys.baseUrl.replace("127.0.0.1", "localhost")}/forms/${form.form_key}`);
    await page.getByLabel("Email").fill("grace@example.com");
    await Promise.all([
      page.waitForURL(/\/health\?from=form$/),
      page.getByRole("button", { name: "Submit" }).click(),
    ]);
    const listed = await api("GET", v1(table.databaseId, table.tableId).records, {
      token: tenant.readToken,
      query: q({ response_format: "names" }),
    });
    expect(listed.body.data.records.map((r: { data: unknown }) => r.data)).toEqual([
      { Email: "grace@example.com" },
    ]);
    await page.close();
  });

  it("shows names, descriptions and choice labels holding HTML and script as text", async () => {
    const tenant = await createTenant(sys, api);
    const attack = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`;
    const table = await createTable(api, tenant, [
      { name: "<b>bold</b> name", type: "text", description: attack },
      {
        name: "Choice",
        type: "single_select",
        options: { choices: [{ name: "<i>x</i>" }, { name: `"><script>1</script>` }] },
      },
      { name: "Many", type: "multi_select", options: { choices: [{ name: "<u>u</u>" }] } },
    ]);
    const form = await createForm(tenant, table, {
      name: `<script>window.__pwned = 3</script>Title`,
      fields: ["Choice", "Many", table.fields[0]!.field_id],
    });
    const page = await browser.newPage();
    await page.goto(`${sys.baseUrl}/forms/${form.form_key}`);
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator("script, img, b, i, u").count()).toBe(0);
    expect(await page.locator("h1").textContent()).toBe("<script>window.__pwned = 3</script>Title");
    expect(await page.getByText("<b>bold</b> name", { exact: true }).count()).toBe(1);
    expect(await page.getByText(attack, { exact: true }).count()).toBe(1);
    expect(await page.locator("option").allTextContents()).toEqual([
      "Choose…",
      "<i>x</i>",
      `"><script>1</script>`,
    ]);
    expect(await page.getByLabel("<u>u</u>").count()).toBe(1);
    await page.close();
  });
});
