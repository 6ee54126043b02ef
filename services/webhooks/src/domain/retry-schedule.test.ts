import { describe, expect, it } from "vitest";
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule, retryDelayMs } from "./retry-schedule.js";

describe("the retry schedule", () => {
  it("gives ten attempts over about 22 hours by default", () => {
    const schedule = parseRetrySchedule(DEFAULT_RETRY_SCHEDULE);
    expect(schedule).toHaveLength(9);
    expect(schedule.reduce((sum, s) => sum + s, 0) / 3600).toBeCloseTo(22.7, 1);
  });

  it("draws each pause within a quarter of its number, and ends after the last", () => {
    const schedule = parseRetrySchedule("10, 60");
    expect(retryDelayMs(schedule, 1, 0)).toBe(7_500);
    expect(retryDelayMs(schedule, 1, 0.999999)).toBe(12_500);
    expect(retryDelayMs(schedule, 2, 0.5)).toBe(60_000);
    expect(retryDelayMs(schedule, 3, 0.5)).toBeUndefined();
    expect(retryDelayMs(parseRetrySchedule(""), 1)).toBeUndefined();
  });

  it("refuses a schedule that is not whole seconds", () => {
    for (const text of ["5,x", "1.5", "-1", "5,,6"]) {
      expect(() => parseRetrySchedule(text), text).toThrow(/WEBHOOK_RETRY_SCHEDULE/);
    }
  });
});
