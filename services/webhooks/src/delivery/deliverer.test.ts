import { describe, expect, it } from "vitest";
import { verdictOf } from "./deliverer.js";

describe("an attempt's verdict", () => {
  const schedule = [5, 30];

  it("succeeds on any 2xx, and stops the webhook on 410", () => {
    for (const status of [200, 201, 204, 299]) {
      expect(verdictOf({ status }, 1, schedule)).toEqual({ kind: "succeeded" });
    }
    expect(verdictOf({ status: 410 }, 1, schedule)).toEqual({ kind: "gone" });
  });

  it("retries anything else on the schedule, then fails", () => {
    for (const status of [undefined, 199, 301, 400, 404, 500, 503]) {
      const first = verdictOf({ status }, 1, schedule);
      expect(first.kind, String(status)).toBe("retry");
      expect((first as { delayMs: number }).delayMs).toBeGreaterThanOrEqual(3_750);
      expect((first as { delayMs: number }).delayMs).toBeLessThanOrEqual(6_250);
      expect(verdictOf({ status }, 2, schedule).kind).toBe("retry");
      expect(verdictOf({ status }, 3, schedule)).toEqual({ kind: "failed" });
    }
    expect(verdictOf({ status: 500 }, 1, [])).toEqual({ kind: "failed" });
  });
});
