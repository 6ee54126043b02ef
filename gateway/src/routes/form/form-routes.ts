import type { Client } from "@connectrpc/connect";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { defineRoute, type Route } from "../../routing/route.js";
import { presentForm } from "./form-presenters.js";
import {
  FormCreateSchema,
  FormDataSchema,
  FormIdQuery,
  FormListSchema,
  FormTableQuery,
  FormUpdateSchema,
} from "./form-schemas.js";

export interface FormRoutesDeps {
  catalog: Client<typeof CatalogService>;
}

const tags = ["Forms"];

/**
 * The forms of a table, for a signed-in member: any member reads them; owner, admin and editor
 * manage them (enforced by the catalog service, which owns forms with their tables).
 */
export function formRoutes({ catalog }: FormRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "POST",
      path: "/form/create",
      operationId: "formCreate",
      summary: "Create a public form that adds records to a table",
      tags,
      auth: "session",
      query: FormTableQuery,
      body: FormCreateSchema,
      response: FormDataSchema,
      errors: [
        "table_not_found",
        "organization_forbidden",
        "form_field_not_allowed",
        "form_limit_exceeded",
      ],
      async handle({ query, body, call }) {
        const response = await catalog.createForm(
          {
            tableId: query.table_id,
            name: body.name,
            fields: body.fields,
            required: body.required ?? [],
            successMessage: body.success_message ?? "",
            redirectUrl: body.redirect_url ?? "",
            active: body.active,
          },
          call,
        );
        return { form: presentForm(response.form) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/form/list",
      operationId: "formList",
      summary: "The table's forms, oldest first",
      tags,
      auth: "session",
      query: FormTableQuery,
      response: FormListSchema,
      errors: ["table_not_found"],
      async handle({ query, call }) {
        const { forms } = await catalog.listForms({ tableId: query.table_id }, call);
        return { forms: forms.map((form) => presentForm(form)) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/form/get",
      operationId: "formGet",
      summary: "One form",
      tags,
      auth: "session",
      query: FormIdQuery,
      response: FormDataSchema,
      errors: ["form_not_found"],
      async handle({ query, call }) {
        const response = await catalog.getForm({ formId: query.form_id }, call);
        return { form: presentForm(response.form) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/form/update",
      operationId: "formUpdate",
      summary: "Change a form",
      tags,
      auth: "session",
      query: FormIdQuery,
      body: FormUpdateSchema,
      response: FormDataSchema,
      errors: ["form_not_found", "organization_forbidden", "form_field_not_allowed"],
      async handle({ query, body, call }) {
        const response = await catalog.updateForm(
          {
            formId: query.form_id,
            name: body.name,
            fields: body.fields && { references: body.fields },
            required: body.required && { references: body.required },
            successMessage: body.success_message,
            redirectUrl: body.redirect_url,
            active: body.active,
          },
          call,
        );
        return { form: presentForm(response.form) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/form/delete",
      operationId: "formDelete",
      summary: "Delete a form; its page and routes answer 404 from then on",
      tags,
      auth: "session",
      query: FormIdQuery,
      errors: ["form_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        await catalog.deleteForm({ formId: query.form_id }, call);
        return {};
      },
    }),
  ];
}
