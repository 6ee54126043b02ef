import { describe, expect, it } from "vitest";
import { jsonArrayText } from "./sql.js";

describe("jsonArrayText", () => {
  it("is the UTF-8 text of the texts as one JSON array", () => {
    const texts = [JSON.stringify({ a: "é ✓ 😀" }), "1", JSON.stringify("\ud800 lone")];
    const buffer = jsonArrayText(texts);
    expect(buffer.toString("utf8")).toBe(`[${texts.join(",")}]`);
    expect(buffer.byteLength).toBe(Buffer.byteLength(`[${texts.join(",")}]`));
    expect(jsonArrayText([]).toString()).toBe("[]");
  });
});
