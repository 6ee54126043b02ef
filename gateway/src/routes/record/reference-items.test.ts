import { describe, expect, it } from "vitest";
import { splitReferenceItems } from "./reference-items.js";

const sort = (text: string) => splitReferenceItems(text, { descending: true });
const fields = (text: string) => splitReferenceItems(text, { descending: false });

describe("splitReferenceItems", () => {
  it("splits at top-level commas, keeping each item exactly as written", () => {
    expect(fields("Name,Age,12")).toEqual(["Name", "Age", "12"]);
    expect(sort(" -Age , Name")).toEqual([" -Age ", " Name"]);
    expect(fields("Only")).toEqual(["Only"]);
  });

  it("keeps a double-quoted name whole, commas and doubled quotes included", () => {
    expect(fields('Name,"Size, net",x')).toEqual(["Name", '"Size, net"', "x"]);
    expect(fields('"say ""hi"", ok",b')).toEqual(['"say ""hi"", ok"', "b"]);
    expect(sort('-"a,b",c')).toEqual(['-"a,b"', "c"]);
    expect(sort('- "a,b" ,c')).toEqual(['- "a,b" ', "c"]);
  });

  it("reads a leading - as a direction only in sort", () => {
    expect(sort('-"x,y"')).toEqual(['-"x,y"']);
    expect(fields('-"x,y"')).toEqual(['-"x', 'y"']);
  });

  it("leaves every judgement to the records service: empty items, an open quote", () => {
    expect(fields("a,,b,")).toEqual(["a", "", "b", ""]);
    expect(fields('a,"open, quote')).toEqual(["a", '"open, quote']);
    expect(fields(" ")).toEqual([" "]);
  });

  it("gives no items for empty text: the default order and every field", () => {
    expect(sort("")).toEqual([]);
    expect(fields("")).toEqual([]);
  });

  it("joins back to the parameter exactly, so positions in errors are the client's", () => {
    for (const text of [
      'Name,"Size, net",-Age',
      ' a , "b "" c" ,, "unterminated',
      'x"y,z',
      '😀,ü,"é,è"',
      ",",
    ]) {
      expect(sort(text).join(",")).toBe(text);
      expect(fields(text).join(",")).toBe(text);
    }
  });
});
