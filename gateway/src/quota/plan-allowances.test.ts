import { create } from "@bufbuild/protobuf";
import { PlanLimitsSchema } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { describe, expect, it } from "vitest";
import { cachedApiCallAllowance, encodeCachedPlanLimits } from "./plan-allowances.js";

const free = create(PlanLimitsSchema, {
  records: 1_000n,
  apiCallsPerMonth: 3_000n,
  fileStorageBytes: 100_000_000n,
  transferBytesPerMonth: 1_000_000_000n,
  members: 3n,
  maxFileBytes: 10_000_000n,
});

describe("the cached plan entry", () => {
  it("is PlanLimits in protobuf JSON with every key, int64s as strings", () => {
    expect(JSON.parse(encodeCachedPlanLimits(free))).toEqual({
      records: "1000",
      apiCallsPerMonth: "3000",
      fileStorageBytes: "100000000",
      transferBytesPerMonth: "1000000000",
      members: "3",
      maxFileBytes: "10000000",
    });
  });

  it("keeps a zero allowance (an enterprise plan may set one) rather than dropping the key", () => {
    const none = create(PlanLimitsSchema, { ...free, apiCallsPerMonth: 0n });
    expect(cachedApiCallAllowance(encodeCachedPlanLimits(none))).toBe(0n);
  });

  it("reads back the allowance it wrote", () => {
    expect(cachedApiCallAllowance(encodeCachedPlanLimits(free))).toBe(3_000n);
  });

  it("holds `records` where the records service reads it (a decimal string)", () => {
    const entry = JSON.parse(encodeCachedPlanLimits(free)) as { records?: unknown };
    expect(entry.records).toBe("1000");
  });

  it("treats an entry without the allowance as a miss: another service cached only its part", () => {
    expect(cachedApiCallAllowance(null)).toBeUndefined();
    expect(cachedApiCallAllowance('{"records":"1000"}')).toBeUndefined();
    expect(cachedApiCallAllowance('{"apiCallsPerMonth":3000}')).toBeUndefined();
    expect(cachedApiCallAllowance('{"apiCallsPerMonth":"-1"}')).toBeUndefined();
    expect(cachedApiCallAllowance("not json")).toBeUndefined();
    expect(cachedApiCallAllowance("null")).toBeUndefined();
  });
});
