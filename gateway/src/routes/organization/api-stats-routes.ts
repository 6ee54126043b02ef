import type { Client } from "@connectrpc/connect";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { defineRoute, type Route } from "../../routing/route.js";
import { presentApiStats } from "./api-stats-presenters.js";
import { ApiStatsQuery, ApiStatsSchema } from "./api-stats-schemas.js";

export interface ApiStatsRoutesDeps {
  organization: Client<typeof OrganizationService>;
}

/**
 * `/organization/api_stats`: the usage the gateway counts (record and file
 * route calls, file transfer) as the organization service adds it up per UTC day and token from
 * usage events. Counted calls arrive a moment later; refused calls (429) are never counted.
 */
export function apiStatsRoutes({ organization }: ApiStatsRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "GET",
      path: "/organization/api_stats",
      operationId: "organizationApiStats",
      summary: "Public API calls and data transfer per day and per token over a period",
      description:
        "`from` and `to` are whole UTC days, inclusive, at most 366 days apart; without them, " +
        "the first of this month to today. Any member may read them.",
      tags: ["Organizations"],
      auth: "session",
      query: ApiStatsQuery,
      response: ApiStatsSchema,
      errors: ["organization_not_found"],
      async handle({ query, call }) {
        const response = await organization.getApiStats(
          {
            organizationId: query.organization_id,
            fromDate: query.from ?? "",
            toDate: query.to ?? "",
          },
          call,
        );
        return presentApiStats(response.stats);
      },
    }),
  ];
}
