import type { Client } from "@connectrpc/connect";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { idOf } from "../../presentation/wire-values.js";
import { defineRoute, type Route } from "../../routing/route.js";
import { DeleteSchema } from "../database/database-schemas.js";
import { fieldDefinitionOf, presentField } from "../field/field-presenters.js";
import { presentTable } from "./table-presenters.js";
import {
  TableCreateSchema,
  TableDatabaseQuery,
  TableGetSchema,
  TableIdQuery,
  TableListSchema,
  TableUpdateDataSchema,
  TableUpdateSchema,
} from "./table-schemas.js";

export interface TableRoutesDeps {
  catalog: Client<typeof CatalogService>;
}

const tags = ["Tables"];

/**
 * The tables of a database, for a signed-in member (any member reads, and so does an API token of the organization; owner,
 * admin and editor write, enforced by the catalog service).
 */
export function tableRoutes({ catalog }: TableRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "POST",
      path: "/table/create",
      operationId: "tableCreate",
      summary: "Create a table in a database, optionally with its first fields",
      tags,
      auth: "session",
      query: TableDatabaseQuery,
      body: TableCreateSchema,
      response: TableGetSchema,
      errors: [
        "database_not_found",
        "organization_forbidden",
        "table_name_taken",
        "table_limit_exceeded",
        "field_name_taken",
        "invalid_field_options",
      ],
      async handle({ query, body, call }) {
        const response = await catalog.createTable(
          {
            databaseId: query.database_id,
            name: body.name,
            description: body.description ?? "",
            fields: (body.fields ?? []).map(fieldDefinitionOf),
          },
          call,
        );
        return {
          table: presentTable(response.table),
          fields: response.fields.map((field) => presentField(field)),
        };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/table/get",
      operationId: "tableGet",
      summary: "One table with its fields in position order",
      tags,
      auth: "session_or_token",
      query: TableIdQuery,
      response: TableGetSchema,
      errors: ["table_not_found"],
      async handle({ query, call }) {
        const response = await catalog.getTable({ tableId: query.table_id }, call);
        return {
          table: presentTable(response.table),
          fields: response.fields.map((field) => presentField(field)),
        };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/table/update",
      operationId: "tableUpdate",
      summary: "Rename a table or change its description",
      tags,
      auth: "session",
      query: TableIdQuery,
      body: TableUpdateSchema,
      response: TableUpdateDataSchema,
      errors: ["table_not_found", "organization_forbidden", "table_name_taken"],
      async handle({ query, body, call }) {
        const response = await catalog.updateTable(
          { tableId: query.table_id, name: body.name, description: body.description },
          call,
        );
        return { table: presentTable(response.table) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/table/delete",
      operationId: "tableDelete",
      summary: "Delete a table with its fields, records and files",
      description:
        "The links of other tables that point to it are deleted too, with the lookups and " +
        "rollups that depend on them.",
      tags,
      auth: "session",
      query: TableIdQuery,
      response: DeleteSchema,
      errors: ["table_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        const response = await catalog.deleteTable({ tableId: query.table_id }, call);
        return { deleted_id: idOf(response.deletedId) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/table/list",
      operationId: "tableList",
      summary: "The database's tables",
      tags,
      auth: "session_or_token",
      query: TableDatabaseQuery,
      response: TableListSchema,
      errors: ["database_not_found"],
      async handle({ query, call }) {
        const { tables } = await catalog.listTables({ databaseId: query.database_id }, call);
        return { tables: tables.map((table) => presentTable(table)) };
      },
    }),
  ];
}
