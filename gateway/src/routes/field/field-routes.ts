import type { Client } from "@connectrpc/connect";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { fieldTypeValue } from "../../presentation/field-types.js";
import { defineRoute, type Route } from "../../routing/route.js";
import { fieldDefinitionOf, presentField } from "./field-presenters.js";
import {
  FieldCreateSchema,
  FieldGetSchema,
  FieldIdQuery,
  FieldListSchema,
  FieldTableQuery,
  FieldUpdateSchema,
} from "./field-schemas.js";

export interface FieldRoutesDeps {
  catalog: Client<typeof CatalogService>;
  /**
   * How long an update that may convert stored values waits for catalog: records converts the
   * field's column before catalog answers, which takes minutes on a table of millions of
   * records (`SCHEMA_CHANGE_TIMEOUT_SECONDS`, kit's `schemaChangeDeadlines`).
   */
  schemaChangeMs: number;
}

const tags = ["Fields"];

/**
 * The fields (columns) of a table, for a signed-in member (any member reads, and so does an API token of the organization;
 * owner, admin and editor write, enforced by the catalog service, which also judges options).
 */
export function fieldRoutes({ catalog, schemaChangeMs }: FieldRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "POST",
      path: "/field/create",
      operationId: "fieldCreate",
      summary: "Add a field to a table, last in its field order",
      tags,
      auth: "session",
      query: FieldTableQuery,
      body: FieldCreateSchema,
      response: FieldGetSchema,
      errors: [
        "table_not_found",
        "organization_forbidden",
        "field_name_taken",
        "field_limit_exceeded",
        "invalid_field_options",
      ],
      async handle({ query, body, call }) {
        const response = await catalog.createField(
          { tableId: query.table_id, field: fieldDefinitionOf(body) },
          call,
        );
        return { field: presentField(response.field) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/field/list",
      operationId: "fieldList",
      summary: "The table's fields in position order",
      tags,
      auth: "session_or_token",
      query: FieldTableQuery,
      response: FieldListSchema,
      errors: ["table_not_found"],
      async handle({ query, call }) {
        const { fields } = await catalog.listFields({ tableId: query.table_id }, call);
        return { fields: fields.map((field) => presentField(field)) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/field/update",
      operationId: "fieldUpdate",
      summary: "Rename, move, retype or reconfigure a field",
      description:
        "A type change converts stored values where a conversion exists (text <-> number, " +
        "boolean, date, select, email, url, phone) and otherwise answers " +
        "`field_type_change_invalid`. A choice that keeps its `id` under a new name is renamed, " +
        "stored values included. Making a field `required` while a record's value is empty, or " +
        "changing a required field so that one becomes empty, answers " +
        "`field_type_change_invalid`, as does making a link single while a record holds more " +
        "than one linked record. No type changes into or out of link, lookup or rollup, and a " +
        "link keeps its `table_id` and `inverse_field_id`. A change that converts stored values " +
        "(`type`, `options` or `required`) is made before the answer and may take minutes on a " +
        "large table; past the server's limit it answers 503 and nothing changes.",
      tags,
      auth: "session",
      query: FieldIdQuery,
      body: FieldUpdateSchema,
      response: FieldGetSchema,
      errors: [
        "field_not_found",
        "organization_forbidden",
        "field_name_taken",
        "invalid_field_options",
        "field_type_change_invalid",
      ],
      async handle({ query, body, call }) {
        // Only a change records may convert values for gets the long deadline: a rename or a
        // move keeps the ordinary one, so a hung service still costs it 10 s at most.
        const converts =
          body.type !== undefined || body.options !== undefined || body.required !== undefined;
        const response = await catalog.updateField(
          {
            fieldId: query.field_id,
            name: body.name,
            type: body.type === undefined ? undefined : fieldTypeValue(body.type),
            options: body.options,
            required: body.required,
            description: body.description,
            position: body.position,
          },
          converts ? { ...call, timeoutMs: schemaChangeMs } : call,
        );
        return { field: presentField(response.field) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/field/delete",
      operationId: "fieldDelete",
      summary: "Delete a field and its values in every record",
      description:
        "A link takes its inverse along, and every lookup or rollup that goes through or shows " +
        "a deleted field is deleted with it.",
      tags,
      auth: "session",
      query: FieldIdQuery,
      errors: ["field_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        await catalog.deleteField({ fieldId: query.field_id }, call);
        return {};
      },
    }),
  ];
}
