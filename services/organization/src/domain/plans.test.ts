import { describe, expect, it } from "vitest";
import { enterpriseLimitProblems, FIXED_PLAN_LIMITS, limitsOf, storedLimits } from "./plans.js";

describe("plans", () => {
  it("has the documented limits of each plan in decimal units", () => {
    expect(FIXED_PLAN_LIMITS.free).toEqual({
      records: 1_000n,
      apiCallsPerMonth: 3_000n,
      fileStorageBytes: 100_000_000n,
      transferBytesPerMonth: 1_000_000_000n,
      members: 3n,
      maxFileBytes: 10_000_000n,
      changeStreams: 5n,
      webhooks: 5n,
      forms: 3n,
    });
    expect(FIXED_PLAN_LIMITS.plus.changeStreams).toBe(25n);
    expect(FIXED_PLAN_LIMITS.business.changeStreams).toBe(100n);
    expect(FIXED_PLAN_LIMITS.plus.webhooks).toBe(25n);
    expect(FIXED_PLAN_LIMITS.business.webhooks).toBe(100n);
    expect(FIXED_PLAN_LIMITS.plus.forms).toBe(20n);
    expect(FIXED_PLAN_LIMITS.business.forms).toBe(100n);
    expect(FIXED_PLAN_LIMITS.plus.fileStorageBytes).toBe(5_000_000_000n);
    expect(FIXED_PLAN_LIMITS.business.transferBytesPerMonth).toBe(250_000_000_000n);
    expect(FIXED_PLAN_LIMITS.business.members).toBe(30n);
  });

  it("stores enterprise limits by their REST names and reads them back", () => {
    const limits = { ...FIXED_PLAN_LIMITS.business, members: 500n };
    const stored = storedLimits(limits);
    expect(stored).toMatchObject({ api_calls_per_month: 5_000_000, members: 500 });
    expect(limitsOf("enterprise", stored)).toEqual(limits);
    expect(enterpriseLimitProblems(limits)).toEqual([]);
    // Limits stored before change_streams existed take the business plan's.
    const { change_streams: _, ...older } = stored;
    expect(limitsOf("enterprise", older).changeStreams).toBe(100n);
    const { webhooks: __, ...beforeWebhooks } = stored;
    expect(limitsOf("enterprise", beforeWebhooks).webhooks).toBe(100n);
    const { forms: ___, ...beforeForms } = stored;
    expect(limitsOf("enterprise", beforeForms).forms).toBe(100n);
    expect(enterpriseLimitProblems({ ...limits, members: 0n, records: -1n })).toEqual([
      { key: "records", message: expect.any(String) },
      { key: "members", message: "must be at least 1" },
    ]);
  });
});
