import { describe, expect, it } from "vitest";
import { cursorText, parseCursor } from "./change-log.js";

describe("change cursors", () => {
  it("read back the table and position they were written from", () => {
    const cursor = { tableId: 12n, position: 9_007_199_254_740_991n };
    expect(parseCursor(cursorText(cursor))).toEqual(cursor);
    expect(parseCursor(cursorText({ tableId: 1n, position: 0n }))).toEqual({
      tableId: 1n,
      position: 0n,
    });
  });

  it("are refused when they are not ours", () => {
    for (const text of [
      "",
      "now",
      "nonsense",
      Buffer.from("12:-1").toString("base64url"),
      Buffer.from("0:5").toString("base64url"),
      Buffer.from("12:05").toString("base64url"),
      Buffer.from("12:5:6").toString("base64url"),
      "a".repeat(61),
      "MTI6NQ==",
    ]) {
      expect(parseCursor(text), text).toBeUndefined();
    }
  });
});
