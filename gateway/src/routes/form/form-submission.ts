import type { JsonObject } from "@bufbuild/protobuf";
import { foldName } from "@rowbase/kit/field-types";
import type { Field } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { ValidationFailed, type ValidationItem } from "../../errors/validation-failed.js";
import { type FieldTypeName, fieldTypeName } from "../../presentation/field-types.js";

/**
 * The form's hidden field for bots (a honeypot): people never see it, so a submission that fills
 * it is a bot's. It is answered as a success and stored nowhere. Its name is no field reference
 * of the page (whose inputs are named by field id) and reads like one a bot would fill.
 */
export const BOT_TRAP_NAME = "website_confirm";

/** One field of a public form, as the page, the schema and a submission see it. */
export interface FormField {
  id: bigint;
  name: string;
  type: FieldTypeName;
  required: boolean;
  description: string;
  options: JsonObject;
}

/** The form's fields, required by the form or by the table. */
export function formFieldsOf(fields: readonly Field[], required: readonly bigint[]): FormField[] {
  return fields.map((field) => ({
    id: field.fieldId,
    name: field.name,
    type: fieldTypeName(field.type),
    required: field.required || required.includes(field.fieldId),
    description: field.description,
    options: field.options ?? {},
  }));
}

const ALL_DIGITS = /^[0-9]+$/;

/** The form field a data key names, by id (all digits) or by name, as record bodies do. */
function fieldOf(fields: readonly FormField[], key: string): FormField | undefined {
  if (ALL_DIGITS.test(key)) return fields.find((field) => field.id.toString() === key);
  const folded = foldName(key);
  return fields.find((field) => foldName(field.name) === folded);
}

/** Whether a value leaves a field empty, as the record routes read emptiness. */
function isEmpty(value: unknown): boolean {
  return (
    value === undefined ||
    value === null ||
    (typeof value === "string" && value.trim() === "") ||
    (Array.isArray(value) && value.length === 0)
  );
}

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
/** What `<input type="datetime-local">` sends: a local time without a zone, read as UTC. */
const LOCAL_DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/;

/**
 * A value from an HTML form (always text) as the field's type stores it: numbers, checkboxes
 * (`on`, `true`, `1`, `yes` are checked), a list for multiple choice, a page's local date-time as
 * UTC. A text that does not convert is passed on as it is, so that the record routes' own check
 * refuses it with their message; an empty text is no value.
 */
function fromPage(type: FieldTypeName, value: unknown): unknown {
  const texts = Array.isArray(value) ? value : [value];
  const text = typeof texts[0] === "string" ? texts[texts.length - 1].trim() : value;
  switch (type) {
    case "multi_select":
      return texts.filter((item) => typeof item !== "string" || item.trim() !== "");
    case "boolean":
      return typeof text === "string"
        ? ["on", "true", "1", "yes"].includes(text.toLowerCase())
        : text;
    case "number":
      return typeof text === "string" && NUMBER.test(text) ? Number(text) : text;
    case "datetime":
      return typeof text === "string" && LOCAL_DATETIME.test(text)
        ? new Date(`${text}Z`).toISOString()
        : text;
    default:
      return text;
  }
}

/** What a submission becomes: values by field id for the record, or a bot's that stores nothing. */
export type Submission = { bot: true } | { bot: false; data: Record<string, unknown> };

/**
 * A submission's `data` checked against the form: only its fields (anything else is refused, key
 * by key, with nothing written), each required one filled. `fromHtml`: the values came from the
 * page as text and are converted by field type, and a checkbox left unticked is `false`. The
 * values' own types are then checked by the record routes' rules.
 */
export function checkSubmission(
  fields: readonly FormField[],
  data: Record<string, unknown>,
  fromHtml: boolean,
): Submission {
  const trap = data[BOT_TRAP_NAME];
  if (!isEmpty(trap)) return { bot: true };
  const items: ValidationItem[] = [];
  const values: Record<string, unknown> = {};
  for (const [key, raw] of Object.entries(data)) {
    if (key === BOT_TRAP_NAME) continue;
    const field = fieldOf(fields, key);
    if (!field) {
      items.push({
        key: `data.${key}`,
        message: "is not a field of this form",
        source: "body",
        code: "unknown_key",
      });
      continue;
    }
    const value = fromHtml ? fromPage(field.type, raw) : raw;
    if (fromHtml && isEmpty(value)) continue;
    values[field.id.toString()] = value;
  }
  if (fromHtml) {
    for (const field of fields) {
      if (field.type === "boolean" && !(field.id.toString() in values)) {
        values[field.id.toString()] = false;
      }
    }
  }
  for (const field of fields) {
    const value = values[field.id.toString()];
    const missing = isEmpty(value) || (field.type === "boolean" && value === false && fromHtml);
    if (field.required && missing && !items.some((item) => item.key === `data.${field.name}`)) {
      items.push({
        key: `data.${field.name}`,
        message: "is required",
        source: "body",
        code: "required",
      });
    }
  }
  if (items.length > 0) throw new ValidationFailed(items);
  return { bot: false, data: values };
}
