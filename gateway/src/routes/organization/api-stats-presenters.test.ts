import { create } from "@bufbuild/protobuf";
import {
  ApiStatsSchema as ApiStatsMessage,
  DailyUsageSchema,
  TokenUsageSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { describe, expect, it } from "vitest";
import { presentApiStats } from "./api-stats-presenters.js";
import { ApiStatsSchema } from "./api-stats-schemas.js";

describe("the API statistics presenter", () => {
  it("writes the ApiStatsResponse data: period, totals, days and tokens", () => {
    const stats = presentApiStats(
      create(ApiStatsMessage, {
        fromDate: "2026-11-01",
        toDate: "2026-11-03",
        apiCalls: 12n,
        transferBytes: 5_000_000_000n,
        days: [
          create(DailyUsageSchema, { date: "2026-11-01", apiCalls: 0n, transferBytes: 0n }),
          create(DailyUsageSchema, {
            date: "2026-11-02",
            apiCalls: 10n,
            transferBytes: 5_000_000_000n,
          }),
          create(DailyUsageSchema, { date: "2026-11-03", apiCalls: 2n, transferBytes: 0n }),
        ],
        tokens: [
          create(TokenUsageSchema, { tokenId: 7n, name: "Zapier", apiCalls: 9n }),
          create(TokenUsageSchema, { tokenId: 3n, name: "Bot", apiCalls: 1n }),
        ],
      }),
    );
    expect(stats).toEqual({
      period: { from: "2026-11-01", to: "2026-11-03" },
      api_calls: 12,
      transfer_bytes: 5_000_000_000,
      daily: [
        { date: "2026-11-01", api_calls: 0, transfer_bytes: 0 },
        { date: "2026-11-02", api_calls: 10, transfer_bytes: 5_000_000_000 },
        { date: "2026-11-03", api_calls: 2, transfer_bytes: 0 },
      ],
      by_token: [
        { token_id: 7, name: "Zapier", api_calls: 9 },
        { token_id: 3, name: "Bot", api_calls: 1 },
      ],
    });
    expect(ApiStatsSchema.parse(stats)).toEqual(stats);
  });

  it("refuses an answer without stats rather than guess (500)", () => {
    expect(() => presentApiStats(undefined)).toThrow(/stats/);
  });
});
