import { create } from "@bufbuild/protobuf";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { timeOf } from "./wire-values.js";

const at = (seconds: bigint, nanos: number) => create(TimestampSchema, { seconds, nanos });

describe("timeOf", () => {
  it("writes RFC 3339 UTC with milliseconds", () => {
    expect(timeOf(at(1_764_115_200n, 123_000_000))).toBe("2025-11-26T00:00:00.123Z");
  });

  it("writes each time as itself when the same and different times alternate", () => {
    const first = at(1_764_115_200n, 5_000_000);
    const second = at(1_764_115_200n, 6_000_000);
    const third = at(1_764_115_201n, 5_000_000);
    expect([first, first, second, second, first, third, third].map(timeOf)).toEqual([
      "2025-11-26T00:00:00.005Z",
      "2025-11-26T00:00:00.005Z",
      "2025-11-26T00:00:00.006Z",
      "2025-11-26T00:00:00.006Z",
      "2025-11-26T00:00:00.005Z",
      "2025-11-26T00:00:01.005Z",
      "2025-11-26T00:00:01.005Z",
    ]);
  });

  it("refuses a missing time", () => {
    expect(() => timeOf(undefined)).toThrow(/missing/);
  });
});
