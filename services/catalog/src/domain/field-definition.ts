import type { JsonObject } from "@bufbuild/protobuf";
import type { ValidationItem } from "@rowbase/kit";
import { textProblemCode } from "@rowbase/kit";
import {
  descriptionProblem,
  FIELD_TYPE_NAMES,
  type FieldTypeName,
  fieldTypeFromProto,
  isReadOnlyType,
  type OptionError,
  parseFieldOptions,
} from "@rowbase/kit/field-types";
import type { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { INVERSE_SET_BY_SERVER } from "./relational-options.js";
import { fieldNameProblem } from "./validation.js";

/** A field as a request defines it (FieldDefinition). */
export interface FieldInput {
  name: string;
  type: FieldType;
  options?: JsonObject | undefined;
  required: boolean;
  description: string;
}

/** A field definition that passed every check, options normalised. */
export interface CheckedField {
  name: string;
  type: FieldTypeName;
  options: JsonObject;
  required: boolean;
  description: string;
}

export type FieldCheck =
  | { ok: true; field: CheckedField }
  | { ok: false; validation: ValidationItem[]; options: OptionError[] };

export const TYPE_MESSAGE = `must be one of ${FIELD_TYPE_NAMES.join(", ")}`;
export const READ_ONLY_REQUIRED = "cannot be true for a read-only type";
const INVERSE_KEY = "options.inverse_field_id";

/**
 * Checks a new field: its name and description (validation failures) and its type's options
 * and `required` (invalid_field_options). `prefix` places the keys, e.g. `fields.2.` for the
 * third initial field of a table.
 */
export function checkFieldDefinition(input: FieldInput, prefix = ""): FieldCheck {
  const validation: ValidationItem[] = [];
  const optionErrors: OptionError[] = [];
  const name = input.name.trim();
  const nameIssue = fieldNameProblem(name);
  if (nameIssue) {
    validation.push({
      key: `${prefix}name`,
      message: nameIssue,
      source: "body",
      code: textProblemCode(name, nameIssue),
    });
  }
  const description = input.description.trim();
  const descriptionIssue = descriptionProblem(description);
  if (descriptionIssue) {
    validation.push({
      key: `${prefix}description`,
      message: descriptionIssue,
      source: "body",
      code: textProblemCode(description, descriptionIssue),
    });
  }
  const type = fieldTypeFromProto(input.type);
  if (!type) {
    validation.push({
      key: `${prefix}type`,
      message: TYPE_MESSAGE,
      source: "body",
      code: "invalid_value",
    });
    return { ok: false, validation, options: optionErrors };
  }
  const options = parseFieldOptions(type, input.options);
  // A link's inverse is the server's to make and name (Fields.create): never the client's.
  const sentInverse = type === "link" && input.options?.inverse_field_id !== undefined;
  if (!options.ok) {
    optionErrors.push(
      ...options.errors
        .filter((e) => !(sentInverse && e.key === INVERSE_KEY))
        .map((e) => ({ ...e, key: `${prefix}${e.key}` })),
    );
  }
  if (sentInverse) {
    optionErrors.push({ key: `${prefix}${INVERSE_KEY}`, message: INVERSE_SET_BY_SERVER });
  }
  if (input.required && isReadOnlyType(type)) {
    optionErrors.push({ key: `${prefix}required`, message: READ_ONLY_REQUIRED });
  }
  if (nameIssue || descriptionIssue || !options.ok || optionErrors.length > 0) {
    return { ok: false, validation, options: optionErrors };
  }
  return {
    ok: true,
    field: {
      name,
      type,
      options: options.options,
      required: input.required,
      description,
    },
  };
}
