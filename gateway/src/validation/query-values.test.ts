import { timestampDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { parseRfc3339, queryDate } from "./query-values.js";

const iso = (text: string) => {
  const timestamp = parseRfc3339(text);
  return timestamp && { iso: timestampDate(timestamp).toISOString(), nanos: timestamp.nanos };
};

describe("RFC 3339 date-times", () => {
  it("are read with their offset, to the nanosecond", () => {
    expect(iso("2026-11-21T10:15:00.000Z")).toEqual({
      iso: "2026-11-21T10:15:00.000Z",
      nanos: 0,
    });
    expect(iso("2026-11-21T10:15:00Z")?.iso).toBe("2026-11-21T10:15:00.000Z");
    expect(iso("2026-11-21t10:15:00z")?.iso).toBe("2026-11-21T10:15:00.000Z");
    expect(iso("2026-11-21T11:15:00+01:00")?.iso).toBe("2026-11-21T10:15:00.000Z");
    expect(iso("2026-11-21T00:15:00-10:30")?.iso).toBe("2026-11-21T10:45:00.000Z");
    expect(iso("2026-11-21T10:15:00.123456789Z")).toEqual({
      iso: "2026-11-21T10:15:00.123Z",
      nanos: 123_456_789,
    });
    expect(iso("2026-11-21T10:15:00.5Z")?.nanos).toBe(500_000_000);
    expect(iso("2028-02-29T00:00:00Z")?.iso).toBe("2028-02-29T00:00:00.000Z");
    expect(iso("0001-01-01T00:00:00Z")?.iso).toBe("0001-01-01T00:00:00.000Z");
    expect(iso("9999-12-31T23:59:59.999999999Z")?.nanos).toBe(999_999_999);
  });

  it("refuse what is not one, or what a Timestamp cannot hold", () => {
    for (const bad of [
      "",
      "2026-11-21",
      "2026-11-21T10:15Z",
      "2026-11-21T10:15:00",
      "2026-11-21 10:15:00Z",
      "2026-11-21T10:15:00.Z",
      "2026-11-21T10:15:00.1234567891Z",
      "2026-11-21T10:15:00+0100",
      "2026-11-21T24:00:00Z",
      "2026-11-21T10:60:00Z",
      "2026-11-21T10:15:60Z",
      "2026-13-01T00:00:00Z",
      "2026-02-29T00:00:00Z",
      "2100-02-29T00:00:00Z",
      "2026-04-31T00:00:00Z",
      "2026-11-21T10:15:00+24:00",
      "0001-01-01T00:00:00+01:00",
      "9999-12-31T23:59:59-01:00",
      "1e12",
      "+2026-11-21T10:15:00Z",
    ]) {
      expect({ bad, parsed: parseRfc3339(bad) }).toEqual({ bad, parsed: undefined });
    }
  });
});

describe("calendar days", () => {
  it("accept YYYY-MM-DD days of the calendar only", () => {
    expect(queryDate.safeParse("2026-11-21").success).toBe(true);
    expect(queryDate.safeParse("2024-02-29").success).toBe(true);
    expect(queryDate.safeParse("2000-02-29").success).toBe(true);
    expect(queryDate.safeParse("0001-01-01").success).toBe(true);
    expect(queryDate.safeParse("9999-12-31").success).toBe(true);
    for (const bad of [
      "2026-2-1",
      "2026-02-30",
      "1900-02-29",
      "2026-11-21T00:00:00Z",
      "today",
      // PostgreSQL has no year 0 (nor does the proleptic Gregorian calendar).
      "0000-01-01",
      "0000-02-29",
    ]) {
      expect({ bad, ok: queryDate.safeParse(bad).success }).toEqual({ bad, ok: false });
    }
    expect(queryDate.safeParse(["2026-11-21", "2026-11-22"]).success).toBe(false);
  });
});
