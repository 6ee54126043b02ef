import { describe, expect, it } from "vitest";
import {
  expiredPartitions,
  monthStart,
  nextMonthStart,
  partitionMonth,
  partitionName,
  retentionCutoff,
  utcLiteral,
} from "./audit-retention.js";

describe("audit retention", () => {
  it("cuts off 90 days back", () => {
    expect(retentionCutoff(new Date("2026-11-21T10:00:00.000Z")).toISOString()).toBe(
      "2026-08-23T10:00:00.000Z",
    );
  });

  it("names monthly partitions in UTC and reads the month back", () => {
    const at = new Date("2026-12-31T23:59:59.999Z");
    expect(partitionName(at)).toBe("audit_event_p202612");
    expect(monthStart(at).toISOString()).toBe("2026-12-01T00:00:00.000Z");
    expect(nextMonthStart(at).toISOString()).toBe("2027-01-01T00:00:00.000Z");
    expect(partitionMonth("audit_event_p202612")?.toISOString()).toBe("2026-12-01T00:00:00.000Z");
    expect(partitionMonth("audit_event_default")).toBeUndefined();
    expect(utcLiteral(monthStart(at))).toBe("2026-12-01 00:00:00+00");
  });

  it("drops only partitions whose whole month is older than the cutoff", () => {
    const names = [
      "audit_event_default",
      "audit_event_p202607",
      "audit_event_p202608",
      "audit_event_p202609",
      "audit_event_p202611",
    ];
    // Cutoff 2026-08-23: July is gone entirely, August straddles it and stays.
    expect(expiredPartitions(names, new Date("2026-11-21T10:00:00.000Z"))).toEqual([
      "audit_event_p202607",
    ]);
    // Cutoff exactly 2026-09-01: August ends at the cutoff and goes.
    expect(expiredPartitions(names, new Date("2026-11-30T00:00:00.000Z"))).toEqual([
      "audit_event_p202607",
      "audit_event_p202608",
    ]);
  });
});
