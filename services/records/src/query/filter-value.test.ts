import { describe, expect, it } from "vitest";
import { formatInstant } from "./calendar.js";
import {
  parseBooleanValue,
  parseDatetimeValue,
  parseDateValue,
  parseIntegerValue,
  parseNumberValue,
} from "./filter-value.js";

const NOW = new Date("2026-11-21T10:15:00.000Z");

describe("parseNumberValue", () => {
  it.each([
    ["0", 0],
    ["-0", 0],
    ["+12", 12],
    ["1.", 1],
    [".25", 0.25],
    ["-2.50", -2.5],
    ["1e3", 1000],
    ["1E-2", 0.01],
    ["1e308", 1e308],
  ])("%s", (text, expected) => {
    expect(parseNumberValue(text)).toEqual({ ok: true, value: expected });
  });

  it.each(["", ".", "abc", "1,5", "0x1f", "Infinity", "NaN", "1e", "--1", " 1", "1 ", "1_000"])(
    "%j is not a number",
    (text) => {
      expect(parseNumberValue(text)).toEqual({ ok: false, message: "is not a number" });
    },
  );

  it("refuses numbers outside the double range and overlong text", () => {
    expect(parseNumberValue("1e309")).toEqual({ ok: false, message: "is not a finite number" });
    expect(parseNumberValue("1".repeat(401)).ok).toBe(false);
  });
});

describe("parseIntegerValue", () => {
  it("reads bigint-range whole numbers", () => {
    expect(parseIntegerValue("+007")).toEqual({ ok: true, value: "7" });
    expect(parseIntegerValue("9223372036854775807")).toEqual({
      ok: true,
      value: "9223372036854775807",
    });
    expect(parseIntegerValue("-9223372036854775808").ok).toBe(true);
    expect(parseIntegerValue("9223372036854775808")).toEqual({
      ok: false,
      message: "is out of range",
    });
    expect(parseIntegerValue("1.0")).toEqual({ ok: false, message: "is not a whole number" });
    expect(parseIntegerValue("1e3").ok).toBe(false);
  });
});

describe("parseBooleanValue", () => {
  it.each([
    ["true", true],
    ["TRUE", true],
    ["1", true],
    ["false", false],
    ["False", false],
    ["0", false],
  ])("%s", (text, expected) => {
    expect(parseBooleanValue(text)).toEqual({ ok: true, value: expected });
  });

  it.each(["yes", "t", "", "2"])("%j is not a boolean", (text) => {
    expect(parseBooleanValue(text).ok).toBe(false);
  });
});

describe("parseDateValue", () => {
  const date = (text: string) => {
    const parsed = parseDateValue(text, NOW);
    return parsed.ok ? formatInstant(parsed.value * 86_400_000).slice(0, 10) : parsed.message;
  };

  it.each([
    ["2026-11-21", "2026-11-21"],
    ["2024-02-29", "2024-02-29"],
    ["2000-02-29", "2000-02-29"],
    ["0001-01-01", "0001-01-01"],
    ["0099-12-31", "0099-12-31"],
    ["9999-12-31", "9999-12-31"],
    ["today", "2026-11-21"],
    ["daysFromNow:10", "2026-12-01"],
  ])("%s", (text, expected) => {
    expect(date(text)).toBe(expected);
  });

  it.each([
    "2023-02-29",
    "1900-02-29",
    "2026-04-31",
    "2026-13-01",
    "2026-00-10",
    "0000-01-01",
    "2026-1-01",
    "20261121",
    "2026-11-21T00:00:00Z",
    "21/11/2026",
  ])("%j is not a date", (text) => {
    expect(date(text)).toBe("is not a date (YYYY-MM-DD, today, daysAgo:N, ...)");
  });

  it("refuses relative dates beyond the years 1-9999", () => {
    expect(date("daysFromNow:9999999")).toBe("is outside the years 1-9999");
    expect(date("daysAgo:1000000")).toBe("is outside the years 1-9999");
  });
});

describe("parseDatetimeValue", () => {
  const span = (text: string) => {
    const parsed = parseDatetimeValue(text, NOW);
    return parsed.ok
      ? [formatInstant(parsed.value.from), formatInstant(parsed.value.to)]
      : parsed.message;
  };

  it.each([
    ["2026-11-21T10:15:00Z", ["2026-11-21T10:15:00.000Z", "2026-11-21T10:15:00.001Z"]],
    ["2026-11-21t10:15:00.5z", ["2026-11-21T10:15:00.500Z", "2026-11-21T10:15:00.501Z"]],
    [
      "2026-11-21 10:15:00.123456789+05:30",
      ["2026-11-21T04:45:00.123Z", "2026-11-21T04:45:00.124Z"],
    ],
    ["2026-01-01T00:30:00+01:00", ["2025-12-31T23:30:00.000Z", "2025-12-31T23:30:00.001Z"]],
    ["2026-11-21", ["2026-11-21T00:00:00.000Z", "2026-11-22T00:00:00.000Z"]],
    ["yesterday", ["2026-11-20T00:00:00.000Z", "2026-11-21T00:00:00.000Z"]],
    ["9999-12-31", ["9999-12-31T00:00:00.000Z", "10000-01-01T00:00:00.000Z"]],
    ["0001-01-01T00:00:00Z", ["0001-01-01T00:00:00.000Z", "0001-01-01T00:00:00.001Z"]],
  ])("%s", (text, expected) => {
    expect(span(text)).toEqual(expected);
  });

  it.each([
    "2026-11-21T24:00:00Z",
    "2026-11-21T10:60:00Z",
    "2026-11-21T10:15:60Z",
    "2026-11-21T10:15Z",
    "2026-11-21T10:15:00",
    "2026-11-21T10:15:00+24:00",
    "2026-02-30T10:15:00Z",
    "now",
  ])("%j is not a date-time", (text) => {
    expect(span(text)).toMatch(/^is not a date-time/);
  });

  it("refuses instants outside the years 1-9999 (UTC)", () => {
    expect(span("0001-01-01T00:30:00+01:00")).toBe("is outside the years 1-9999");
    expect(span("9999-12-31T23:30:00-01:00")).toBe("is outside the years 1-9999");
  });
});
