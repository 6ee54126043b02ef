import { describe, expect, it } from "vitest";
import { contentRangeOf, parseRangeHeader } from "./byte-range.js";

describe("parseRangeHeader", () => {
  it("reads the three forms of one byte range", () => {
    expect(parseRangeHeader("bytes=0-9")).toEqual({ first: 0n, last: 9n });
    expect(parseRangeHeader("bytes=-5")).toEqual({ first: 0n, suffixLength: 5n });
    expect(parseRangeHeader("bytes=5-")).toEqual({ first: 5n });
    expect(parseRangeHeader("bytes=7-7")).toEqual({ first: 7n, last: 7n });
  });

  it("takes the unit in any case and spaces around the range", () => {
    expect(parseRangeHeader("Bytes = 0 - 9 ")).toEqual({ first: 0n, last: 9n });
    expect(parseRangeHeader("BYTES=10-")).toEqual({ first: 10n });
  });

  it("serves the whole file (undefined) for no header, another unit or a malformed range", () => {
    for (const header of [
      undefined,
      "",
      "bytes=",
      "bytes=-",
      "bytes=a-b",
      "bytes=1-2-3",
      "bytes 0-9",
      "items=0-9",
      "bytes=0x10-",
      "bytes=+1-2",
      "bytes=9-0",
    ]) {
      expect({ header, range: parseRangeHeader(header) }).toEqual({ header, range: undefined });
    }
  });

  it("serves the whole file for several ranges (no multipart/byteranges)", () => {
    expect(parseRangeHeader("bytes=0-1,5-6")).toBeUndefined();
    expect(parseRangeHeader("bytes=0-1, -3")).toBeUndefined();
    expect(parseRangeHeader("bytes=0-9,")).toBeUndefined();
  });

  it("leaves whether the range fits the file to the service, which knows its size", () => {
    // A zero suffix and a start past any file are unsatisfiable (416), not ignored.
    expect(parseRangeHeader("bytes=-0")).toEqual({ first: 0n, suffixLength: 0n });
    expect(parseRangeHeader("bytes=99999999999999999999999-")).toEqual({
      first: 2n ** 63n - 1n,
    });
    expect(parseRangeHeader("bytes=0-99999999999999999999999")).toEqual({
      first: 0n,
      last: 2n ** 63n - 1n,
    });
    expect(parseRangeHeader("bytes=0005-0009")).toEqual({ first: 5n, last: 9n });
  });
});

describe("contentRangeOf", () => {
  it("writes the range and the size", () => {
    expect(contentRangeOf(0n, 9n, 100n)).toBe("bytes 0-9/100");
  });
});
