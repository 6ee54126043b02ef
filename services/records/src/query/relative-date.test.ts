import { describe, expect, it } from "vitest";
import { formatDay } from "./calendar.js";
import { relativeDay } from "./relative-date.js";

const NOW = new Date("2026-03-01T00:30:00.000Z");
const day = (text: string, now = NOW) => {
  const result = relativeDay(text, now);
  return result === undefined ? undefined : formatDay(result);
};

describe("relativeDay", () => {
  it.each([
    ["today", "2026-03-01"],
    ["yesterday", "2026-02-28"],
    ["tomorrow", "2026-03-02"],
    ["daysAgo:1", "2026-02-28"],
    ["daysAgo:365", "2025-03-01"],
    ["daysFromNow:306", "2027-01-01"],
    ["daysAgo:0", "2026-03-01"],
    ["DaysFromNow:0", "2026-03-01"],
    ["TODAY", "2026-03-01"],
  ])("%s", (text, expected) => {
    expect(day(text)).toBe(expected);
  });

  it("counts in UTC, whatever the offset the clock was read in", () => {
    expect(day("today", new Date("2024-02-28T23:59:59.999-01:00"))).toBe("2024-02-29");
    expect(day("tomorrow", new Date("2024-02-28T12:00:00Z"))).toBe("2024-02-29");
  });

  it.each([
    "",
    "now",
    "today ",
    "daysAgo:",
    "daysAgo:-1",
    "daysAgo:1.5",
    "daysAgo:12345678",
    "days_ago:1",
  ])("%j is not a relative date", (text) => {
    expect(relativeDay(text, NOW)).toBeUndefined();
  });
});
