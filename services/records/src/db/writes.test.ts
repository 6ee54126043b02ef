import { describe, expect, it } from "vitest";
import { rowIdsParam } from "./rows.js";
import { rowIdsOf } from "./writes.js";

describe("row ids as one text", () => {
  it("reads the allocation's comma-separated ids in order, and none from no text", () => {
    expect(rowIdsOf({ ids: "7,8,9007199254740993" })).toEqual([7n, 8n, 9_007_199_254_740_993n]);
    expect(rowIdsOf({ ids: "42" })).toEqual([42n]);
    expect(rowIdsOf({ ids: null })).toEqual([]);
  });

  it("writes them as a bigint[] literal, an empty one for none", () => {
    expect(rowIdsParam([1n, 22n, 9_007_199_254_740_993n])).toBe("{1,22,9007199254740993}");
    expect(rowIdsParam([])).toBe("{}");
  });
});
