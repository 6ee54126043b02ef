import type { PoolClient } from "pg";
import { describe, expect, it } from "vitest";
import { jsonArrayText, PREPARED_TEXTS_MAX, preparedName, prepareNamedStatements } from "./sql.js";

describe("jsonArrayText", () => {
  it("is the UTF-8 text of the texts as one JSON array", () => {
    const texts = [JSON.stringify({ a: "é ✓ 😀" }), "1", JSON.stringify("\ud800 lone")];
    const buffer = jsonArrayText(texts);
    expect(buffer.toString("utf8")).toBe(`[${texts.join(",")}]`);
    expect(buffer.byteLength).toBe(Buffer.byteLength(`[${texts.join(",")}]`));
    expect(jsonArrayText([]).toString()).toBe("[]");
  });
});

describe("named statements", () => {
  /** A connection that records what its query was sent, as kit's pools wrap it. */
  function connection() {
    const sent: unknown[] = [];
    const client = { query: (config: unknown) => sent.push(config) } as unknown as PoolClient;
    prepareNamedStatements(client);
    return { sent, query: (text: string) => client.query(text, [1]) };
  }

  it("name a text by its hash, and keep only the most recently named texts", () => {
    const { sent, query } = connection();
    const first = "select 1 where $1::int = 1 -- first";
    const name = preparedName(first);
    expect(name).toMatch(/^rb_[0-9a-f]{32}$/);
    query(first);
    expect(sent.pop()).toEqual({ name, text: first, values: [1] });
    // A text named again counts as recent; the oldest others are dropped past the cap.
    for (let n = 0; n < PREPARED_TEXTS_MAX; n++) {
      preparedName(`select ${n} where $1::int = 1`);
      if (n === 0) preparedName(first);
    }
    query(first);
    expect(sent.pop()).toEqual({ name, text: first, values: [1] });
    query("select 0 where $1::int = 1");
    expect(sent.pop()).toBe("select 0 where $1::int = 1");
    // Named again, under the same name as before.
    const again = "select 0 where $1::int = 1";
    expect(preparedName(again)).toBe(preparedName(again));
    query(again);
    expect(sent.pop()).toMatchObject({ text: again });
  });
});
