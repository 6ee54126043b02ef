import type { ApiStats } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { z } from "zod";
import { countOf, idOf, required } from "../../presentation/wire-values.js";
import type { ApiStatsSchema } from "./api-stats-schemas.js";

/** ApiStatsResponse data from GetApiStatsResponse.stats. */
export function presentApiStats(stats: ApiStats | undefined): z.output<typeof ApiStatsSchema> {
  const s = required(stats, "stats");
  return {
    period: { from: s.fromDate, to: s.toDate },
    api_calls: countOf(s.apiCalls),
    transfer_bytes: countOf(s.transferBytes),
    daily: s.days.map((day) => ({
      date: day.date,
      api_calls: countOf(day.apiCalls),
      transfer_bytes: countOf(day.transferBytes),
    })),
    by_token: s.tokens.map((token) => ({
      token_id: idOf(token.tokenId),
      name: token.name,
      api_calls: countOf(token.apiCalls),
    })),
  };
}
