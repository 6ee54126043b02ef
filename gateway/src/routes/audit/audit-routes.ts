import type { Client } from "@connectrpc/connect";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { defineRoute, type Route } from "../../routing/route.js";
import { presentAuditList } from "./audit-presenters.js";
import { AuditListQuery, AuditListSchema } from "./audit-schemas.js";

export interface AuditRoutesDeps {
  organization: Client<typeof OrganizationService>;
}

/**
 * The audit log the organization service stores from every service's audit
 * events, read by any member of the organization. Events arrive asynchronously, a moment after
 * the change that made them.
 */
export function auditRoutes({ organization }: AuditRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "GET",
      path: "/audit/list",
      operationId: "auditList",
      summary: "The audit log of an organization, a database or a table, newest first",
      description:
        "Give exactly one of `organization_id`, `database_id` and `table_id`. Every member of " +
        "the organization may read it; anyone else gets the scope's 404. Kept 90 days. In " +
        "`changes`, a record value's `key` is the field id with the field's name at the time " +
        "as `label`; any other change is keyed by its property name.",
      tags: ["Audit"],
      auth: "session",
      query: AuditListQuery,
      response: AuditListSchema,
      errors: ["organization_not_found", "database_not_found", "table_not_found"],
      async handle({ query, call }) {
        const response = await organization.listAuditEvents(
          {
            scope: query.scope,
            limit: query.limit,
            offset: query.offset,
            since: query.since,
            until: query.until,
            action: query.action,
          },
          call,
        );
        return presentAuditList(response);
      },
    }),
  ];
}
