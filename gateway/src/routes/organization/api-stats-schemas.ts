import { z } from "zod";
import { responseData } from "../../routing/api-schemas.js";
import { queryId } from "../../validation/fields.js";
import { queryDate } from "../../validation/query-values.js";

/**
 * `/organization/api_stats`: a period of whole UTC days, `from` and `to`
 * inclusive, the first of this month to today when left out. The organization service checks
 * the period itself (from not after to, at most 366 days) and names `from` or `to`.
 */
export const ApiStatsQuery = z.strictObject({
  organization_id: queryId.describe("The organization"),
  from: queryDate
    .optional()
    .describe(
      "First day, YYYY-MM-DD (UTC), inclusive; default: the first of this month, also when " +
        "only `to` is given",
    ),
  to: queryDate.optional().describe("Last day, YYYY-MM-DD (UTC), inclusive; default: today"),
});

const count = z.number().int().min(0);
const day = z.iso.date();

export const ApiStatsSchema = responseData(
  "ApiStats",
  z.object({
    period: z.object({ from: day, to: day }).describe("The days counted, inclusive (UTC)"),
    api_calls: count.describe("Record and file route calls over the period"),
    transfer_bytes: count.describe("File bytes uploaded, served and downloaded over the period"),
    daily: z
      .array(z.object({ date: day, api_calls: count, transfer_bytes: count }))
      .describe("Every day of the period, oldest first, days without use as zeros"),
    by_token: z
      .array(z.object({ token_id: z.number().int(), name: z.string(), api_calls: count }))
      .describe(
        "API calls per API token over the period, most first; calls made with a member's " +
          "session are not listed",
      ),
  }),
);
