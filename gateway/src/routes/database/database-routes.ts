import type { Client } from "@connectrpc/connect";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { idOf } from "../../presentation/wire-values.js";
import { defineRoute, type Route } from "../../routing/route.js";
import { presentDatabase } from "./database-presenters.js";
import {
  DatabaseCreateSchema,
  DatabaseGetSchema,
  DatabaseIdQuery,
  DatabaseListSchema,
  DatabaseOrganizationQuery,
  DatabaseUpdateSchema,
  DeleteSchema,
} from "./database-schemas.js";

export interface DatabaseRoutesDeps {
  catalog: Client<typeof CatalogService>;
}

const tags = ["Databases"];

/**
 * Databases, for a signed-in member (any member reads, and so does an API token of the organization; owner, admin and editor write, enforced
 * by the catalog service). Creating and deleting share `org_write_user` with the other routes
 * that create and delete what an organization holds, so that no user can flood them.
 */
export function databaseRoutes({ catalog }: DatabaseRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "POST",
      path: "/database/create",
      operationId: "databaseCreate",
      summary: "Create a database in an organization",
      tags,
      auth: "session",
      rateLimits: ["org_write_user"],
      query: DatabaseOrganizationQuery,
      body: DatabaseCreateSchema,
      response: DatabaseGetSchema,
      errors: ["organization_not_found", "organization_forbidden", "database_limit_exceeded"],
      async handle({ query, body, call }) {
        const response = await catalog.createDatabase(
          {
            organizationId: query.organization_id,
            name: body.name,
            description: body.description ?? "",
          },
          call,
        );
        return { database: presentDatabase(response.database) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/database/get",
      operationId: "databaseGet",
      summary: "One database",
      tags,
      auth: "session_or_token",
      query: DatabaseIdQuery,
      response: DatabaseGetSchema,
      errors: ["database_not_found"],
      async handle({ query, call }) {
        const response = await catalog.getDatabase({ databaseId: query.database_id }, call);
        return { database: presentDatabase(response.database) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/database/update",
      operationId: "databaseUpdate",
      summary: "Rename a database or change its description",
      tags,
      auth: "session",
      query: DatabaseIdQuery,
      body: DatabaseUpdateSchema,
      response: DatabaseGetSchema,
      errors: ["database_not_found", "organization_forbidden"],
      async handle({ query, body, call }) {
        const response = await catalog.updateDatabase(
          { databaseId: query.database_id, name: body.name, description: body.description },
          call,
        );
        return { database: presentDatabase(response.database) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/database/delete",
      operationId: "databaseDelete",
      summary: "Delete a database with its tables, fields, records and files",
      tags,
      auth: "session",
      rateLimits: ["org_write_user"],
      query: DatabaseIdQuery,
      response: DeleteSchema,
      errors: ["database_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        const response = await catalog.deleteDatabase({ databaseId: query.database_id }, call);
        return { deleted_id: idOf(response.deletedId) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/database/list",
      operationId: "databaseList",
      summary: "The organization's databases",
      tags,
      auth: "session_or_token",
      query: DatabaseOrganizationQuery,
      response: DatabaseListSchema,
      errors: ["organization_not_found"],
      async handle({ query, call }) {
        const { databases } = await catalog.listDatabases(
          { organizationId: query.organization_id },
          call,
        );
        return { databases: databases.map((database) => presentDatabase(database)) };
      },
    }),
  ];
}
