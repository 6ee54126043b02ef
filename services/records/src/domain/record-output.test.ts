import { Code, ConnectError } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import type { SchemaField } from "../table-schema.js";
import { outputData, renderTexts, type StoredRecord } from "./record-output.js";

const field = (id: string, type: SchemaField["type"]): SchemaField => ({
  id,
  name: `F${id}`,
  type,
  options: {},
  required: false,
  description: "",
});
const FIELDS = [field("1", "text"), field("2", "long_text")];
const recordOf = (rowId: number, data: StoredRecord["data"]): StoredRecord => ({
  rowId: BigInt(rowId),
  tableId: 1n,
  data,
  createdAt: new Date(0),
  updatedAt: new Date(0),
});
/** Markdown that takes markdown-it a while: tens of milliseconds per value. */
const heavy = (n: number) =>
  `${"**Heavy** text with a [link](https://example.com). ".repeat(4000)}${n}`;

describe("renderTexts", () => {
  it("renders each distinct long text once, and nothing for markdown or tables without one", async () => {
    const records = [
      recordOf(1, { "1": "*not* long text", "2": "**same**" }),
      recordOf(2, { "2": "**same**" }),
      recordOf(3, { "2": null }),
    ];
    const signal = new AbortController().signal;
    const rendered = await renderTexts(records, FIELDS, "html", signal);
    expect([...(rendered ?? [])]).toEqual([["**same**", "<p><strong>same</strong></p>\n"]]);
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
    const rendered = await renderTexts(records, FIELDS, "plain", new AbortController().signal);
    done = true;
    expect(rendered?.size).toBe(4);
    expect(turns).toBeGreaterThan(1);

    const controller = new AbortController();
    setImmediate(() => controller.abort());
    const refused = await renderTexts(records, FIELDS, "html", controller.signal).catch(
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.Canceled);
  });
});
