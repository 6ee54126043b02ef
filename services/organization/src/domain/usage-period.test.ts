import { describe, expect, it } from "vitest";
import { usagePeriodOf } from "./usage-period.js";

const now = new Date("2026-11-21T23:30:00.000Z");

describe("usagePeriodOf", () => {
  it("defaults to the first of this month through today (UTC)", () => {
    const period = usagePeriodOf("", "", now);
    expect(period).toMatchObject({ from: "2026-11-01", to: "2026-11-21" });
    expect("days" in period && period.days).toHaveLength(21);
  });

  it("defaults from to the first of this month even when to is given, and to to today", () => {
    expect(usagePeriodOf("", "2026-11-03", now)).toMatchObject({
      from: "2026-11-01",
      to: "2026-11-03",
      days: ["2026-11-01", "2026-11-02", "2026-11-03"],
    });
    expect(usagePeriodOf("", "2026-12-02", now)).toMatchObject({
      from: "2026-11-01",
      to: "2026-12-02",
    });
    // A to before this month, from left out: the default from is after it.
    expect(usagePeriodOf("", "2026-10-31", now)).toEqual({
      problems: [
        {
          key: "to",
          message: "must not be before from (default: the first of this month)",
          source: "query",
          code: "out_of_range",
        },
      ],
    });
    expect(usagePeriodOf("2026-11-20", "", now)).toMatchObject({
      days: ["2026-11-20", "2026-11-21"],
    });
  });

  it("lists every day across month and year ends, both ends inclusive", () => {
    const period = usagePeriodOf("2024-12-30", "2025-01-02", now);
    expect(period).toMatchObject({
      days: ["2024-12-30", "2024-12-31", "2025-01-01", "2025-01-02"],
    });
    expect(usagePeriodOf("2024-02-28", "2024-03-01", now)).toMatchObject({
      days: ["2024-02-28", "2024-02-29", "2024-03-01"],
    });
  });

  it("takes days of the first centuries as they are written", () => {
    expect(usagePeriodOf("0050-02-28", "0050-03-01", now)).toMatchObject({
      from: "0050-02-28",
      to: "0050-03-01",
      days: ["0050-02-28", "0050-03-01"],
    });
    expect(usagePeriodOf("0001-01-01", "0001-01-31", now)).toMatchObject({ from: "0001-01-01" });
    // PostgreSQL knows no year 0.
    expect(usagePeriodOf("0000-01-01", "0000-01-02", now)).toMatchObject({
      problems: [{ key: "from" }, { key: "to" }],
    });
  });

  it("refuses malformed, impossible, reversed and over-long periods", () => {
    expect(usagePeriodOf("2026-02-30", "2026-13-01", now)).toEqual({
      problems: [
        {
          key: "from",
          message: "must be a date YYYY-MM-DD",
          source: "query",
          code: "invalid_value",
        },
        { key: "to", message: "must be a date YYYY-MM-DD", source: "query", code: "invalid_value" },
      ],
    });
    expect(usagePeriodOf("21-11-2026", "", now)).toMatchObject({ problems: [{ key: "from" }] });
    expect(usagePeriodOf("2026-11-10", "2026-11-09", now)).toEqual({
      problems: [
        { key: "from", message: "must not be after to", source: "query", code: "out_of_range" },
      ],
    });
    expect(usagePeriodOf("2024-01-01", "2025-01-01", now)).toMatchObject({
      problems: [{ message: "period must be at most 366 days" }],
    });
    expect(usagePeriodOf("2024-01-01", "2024-12-31", now)).toMatchObject({ from: "2024-01-01" });
  });
});
