import { Code, ConnectError, errorInfoOf } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import type { SchemaField } from "../table-schema.js";
import { outputData, type RenderLimits, renderTexts, type StoredRecord } from "./record-output.js";
import { RenderCache, renderKey } from "./render-cache.js";

const field = (id: string, type: SchemaField["type"]): SchemaField => ({
  id,
  name: `F${id}`,
  type,
  options: {},
  required: false,
  description: "",
});
const FIELDS = [field("1", "text"), field("2", "long_text")];
const TABLE = 1n;
const recordOf = (rowId: number, data: StoredRecord["data"]): StoredRecord => ({
  rowId: BigInt(rowId),
  tableId: TABLE,
  data,
  createdAt: new Date(0),
  updatedAt: new Date(0),
});
/** Markdown that takes markdown-it a while: tens of milliseconds per value. */
const heavy = (n: number) =>
  `${"**Heavy** text with a [link](https://example.com). ".repeat(4000)}${n}`;

/** Limits of a test's own: a fresh cache, and a budget no test reaches unless it says so. */
const limitsOf = (budgetMs = 60_000): RenderLimits => ({
  budgetMs,
  cache: new RenderCache(10_000_000),
});

describe("renderTexts", () => {
  it("renders each distinct long text once, and nothing for markdown or tables without one", async () => {
    const records = [
      recordOf(1, { "1": "*not* long text", "2": "**same**" }),
      recordOf(2, { "2": "**same**" }),
      recordOf(3, { "2": null }),
    ];
    const signal = new AbortController().signal;
    const limits = limitsOf();
    const rendered = await renderTexts(records, FIELDS, "html", signal, limits);
    const html = "<p><strong>same</strong></p>\n";
    expect(rendered?.get(records[0]!)?.get("2")).toBe(html);
    expect(rendered?.get(records[1]!)?.get("2")).toBe(html);
    expect(rendered?.get(records[2]!)?.size).toBe(0);
    expect(limits.cache.get(renderKey(TABLE, "html", "**same**"))).toBe(html);
    expect(await renderTexts(records, FIELDS, "markdown", signal)).toBeUndefined();
    expect(await renderTexts(records, [FIELDS[0]!], "plain", signal)).toBeUndefined();
    const options = { keys: "ids" as const, richText: "html" as const, rendered };
    expect(outputData(records[0]!, FIELDS, options)).toEqual({
      "1": "*not* long text",
      "2": "<p><strong>same</strong></p>\n",
    });
  });

  it("lets other work run between heavy values, and stops when the call is given up", async () => {
    const records = [1, 2, 3, 4].map((n) => recordOf(n, { "2": heavy(n) }));
    let turns = 0;
    let done = false;
    const other = () => {
      turns += 1;
      if (!done) setImmediate(other);
    };
    setImmediate(other);
    const rendered = await renderTexts(
      records,
      FIELDS,
      "plain",
      new AbortController().signal,
      limitsOf(),
    );
    done = true;
    expect(rendered?.size).toBe(4);
    expect(turns).toBeGreaterThan(1);

    const controller = new AbortController();
    setImmediate(() => controller.abort());
    const refused = await renderTexts(records, FIELDS, "html", controller.signal, limitsOf()).catch(
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.Canceled);
  });

  it("refuses a call whose rendering passes the budget with a 400 on rich_text, keeping what it rendered", async () => {
    const records = [1, 2, 3].map((n) => recordOf(n, { "2": heavy(n) }));
    const limits = limitsOf(1);
    const signal = new AbortController().signal;
    const refused = await renderTexts(records, FIELDS, "html", signal, limits).catch(
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.InvalidArgument);
    const info = errorInfoOf(refused);
    expect(info?.reason).toBe("validation_failed");
    expect(JSON.parse(info?.metadata.extra ?? "[]")).toEqual([
      {
        key: "rich_text",
        message:
          "the long texts of these records take too long to render: ask for fewer records or for markdown",
        source: "query",
        code: "invalid_value",
      },
    ]);
    // The first value was rendered before the budget ran out: asking again goes further.
    expect(limits.cache.get(renderKey(TABLE, "html", heavy(1)))).toMatch(
      /^<p><strong>Heavy<\/strong>/,
    );
    expect(limits.cache.get(renderKey(TABLE, "html", heavy(3)))).toBeUndefined();
  });

  it("answers cached texts without rendering, so they cost none of the budget", async () => {
    const records = [1, 2, 3].map((n) => recordOf(n, { "2": heavy(n) }));
    const signal = new AbortController().signal;
    const limits = limitsOf();
    const first = await renderTexts(records, FIELDS, "plain", signal, limits);
    const again = await renderTexts(records, FIELDS, "plain", signal, { ...limits, budgetMs: 0 });
    for (const record of records) {
      expect(again?.get(record)?.get("2")).toBe(first?.get(record)?.get("2"));
      expect(again?.get(record)?.get("2")).toMatch(/^Heavy text with a link\./);
    }
    // The cache is by format: the same values as HTML are not in it.
    const html = await renderTexts(records, FIELDS, "html", signal, { ...limits, budgetMs: 0 })
      .then(() => "answered")
      .catch((error: unknown) => errorInfoOf(error)?.reason);
    expect(html).toBe("validation_failed");
  });
});

describe("RenderCache", () => {
  it("drops the least recently used texts once they hold more than its characters", () => {
    const cache = new RenderCache(10);
    cache.set("a", "aaaa");
    cache.set("b", "bbbb");
    expect(cache.get("a")).toBe("aaaa");
    cache.set("c", "cccc");
    expect(cache.get("b")).toBeUndefined();
    expect(cache.get("a")).toBe("aaaa");
    expect(cache.get("c")).toBe("cccc");
    cache.set("a", "AAAAAAA");
    expect(cache.get("c")).toBeUndefined();
    expect(cache.get("a")).toBe("AAAAAAA");
    cache.set("big", "x".repeat(11));
    expect(cache.get("big")).toBeUndefined();
    expect(cache.get("a")).toBe("AAAAAAA");
  });

  it("keys a text by table, format and content, long texts of one length apart", () => {
    const long = (last: string) => `${"a".repeat(99_999)}${last}`;
    expect(renderKey(1n, "html", long("1"))).not.toBe(renderKey(1n, "html", long("2")));
    expect(renderKey(1n, "html", long("1"))).not.toBe(renderKey(1n, "plain", long("1")));
    expect(renderKey(1n, "html", long("1"))).not.toBe(renderKey(2n, "html", long("1")));
    expect(renderKey(1n, "html", long("1"))).toBe(renderKey(1n, "html", long("1")));
  });
});
