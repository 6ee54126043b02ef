import type { Form } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import type { z } from "zod";
import { idOf, required, timeOf } from "../../presentation/wire-values.js";
import type { FormSchema } from "./form-schemas.js";

/** `form` is the response field that carries it; missing, it is a service bug (500). */
export function presentForm(form: Form | undefined): z.output<typeof FormSchema> {
  const f = required(form, "form");
  return {
    form_id: idOf(f.formId),
    form_key: f.formKey,
    organization_id: idOf(f.organizationId),
    database_id: idOf(f.databaseId),
    table_id: idOf(f.tableId),
    name: f.name,
    fields: f.fields.map(idOf),
    required: f.required.map(idOf),
    success_message: f.successMessage,
    redirect_url: f.redirectUrl,
    active: f.active,
    submissions: idOf(f.submissions),
    created_at: timeOf(f.createdAt),
    updated_at: timeOf(f.updatedAt),
  };
}
