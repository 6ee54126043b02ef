import {
  DESCRIPTION_MAX_LENGTH,
  MAX_FORM_FIELDS,
  MAX_REDIRECT_URL_LENGTH,
  redirectUrlProblem,
} from "@rowbase/kit/field-types";
import { z } from "zod";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { description, name, queryId, refusing } from "../../validation/fields.js";

/** Query parameters of the /form routes. */

export const FormTableQuery = z.strictObject({ table_id: queryId.describe("The form's table") });

export const FormIdQuery = z.strictObject({ form_id: queryId.describe("The form") });

/** A field reference in a form's body: its id (a number or digits) or its name. */
const fieldReference = z
  .union([z.number().int().min(1), z.string().min(1).max(200)])
  .transform((value) => String(value))
  .describe("A field's id, or its name");

const formKeys = {
  name: name.describe("Shown as the form's title"),
  fields: z
    .array(fieldReference)
    .min(1, `must have 1-${MAX_FORM_FIELDS} items`)
    .max(MAX_FORM_FIELDS, `must have 1-${MAX_FORM_FIELDS} items`)
    .describe(
      "The fields the form shows, in order. Fields of read-only types and file fields cannot " +
        "be in a form (400 `form_field_not_allowed`).",
    ),
  required: z
    .array(fieldReference)
    .max(MAX_FORM_FIELDS)
    .describe("Fields a submission must fill; each one of `fields`. Default none."),
  success_message: description.describe(
    `Shown on the thank-you page after a submission; at most ${DESCRIPTION_MAX_LENGTH} characters`,
  ),
  redirect_url: z
    .string()
    .trim()
    .superRefine(refusing(redirectUrlProblem))
    .meta({ maxLength: MAX_REDIRECT_URL_LENGTH })
    .describe(
      "Where the page sends the browser after a submission (303) instead of the thank-you page: " +
        "an absolute https URL (http only on localhost). An empty string clears it.",
    ),
  active: z.boolean().describe("An inactive form's page and routes answer 404. Default true."),
};

export const FormCreateSchema = requestBody(
  "FormCreateSchema",
  z.strictObject({
    name: formKeys.name,
    fields: formKeys.fields,
    required: formKeys.required.optional(),
    success_message: formKeys.success_message.optional(),
    redirect_url: formKeys.redirect_url.optional(),
    active: formKeys.active.optional(),
  }),
  "A public form that writes one record of the table per submission, without a credential.",
);

export const FormUpdateSchema = requestBody(
  "FormUpdateSchema",
  z.strictObject({
    name: formKeys.name.optional(),
    fields: formKeys.fields.optional(),
    required: formKeys.required.optional(),
    success_message: formKeys.success_message.optional(),
    redirect_url: formKeys.redirect_url.optional(),
    active: formKeys.active.optional(),
  }),
  "Keys left out keep their value. Fields the form stops showing stop being required.",
);

const id = z.number().int();
const time = z.iso.datetime();

export const FormSchema = responseData(
  "Form",
  z.object({
    form_id: id,
    form_key: z
      .string()
      .describe(
        "The form's public address (`/forms/{form_key}`): 128 random bits, URL-safe. Not a " +
          "credential: it only lets its holder submit to this form.",
      ),
    organization_id: id,
    database_id: id,
    table_id: id,
    name: z.string(),
    fields: z.array(id).describe("Field ids, in the order the form shows them"),
    required: z.array(id).describe("Field ids a submission must fill"),
    success_message: z.string().describe("Empty when none was given"),
    redirect_url: z.string().describe("Empty: the thank-you page"),
    active: z.boolean(),
    submissions: z.number().int().describe("Records submitted through the form"),
    created_at: time,
    updated_at: time,
  }),
);

export const FormDataSchema = responseData("FormGet", z.object({ form: FormSchema }));

export const FormListSchema = responseData("FormList", z.object({ forms: z.array(FormSchema) }));
