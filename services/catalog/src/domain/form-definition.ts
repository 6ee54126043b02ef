import { randomBytes } from "node:crypto";
import { textProblemCode, type ValidationItem, validationFailed } from "@rowbase/kit";
import {
  descriptionProblem,
  type FieldTypeName,
  foldName,
  formAllowsType,
  MAX_FORM_FIELDS,
  nameProblem,
  redirectUrlProblem,
} from "@rowbase/kit/field-types";
import { formFieldNotAllowed } from "../errors.js";

/**
 * A new form key: 128 random bits as base64url, 22 characters that need no escaping in a URL.
 * It is the form's public address; guessing one is as hard as guessing a random UUID.
 */
export function newFormKey(): string {
  return randomBytes(16).toString("base64url");
}

/** A field of the table, as form references resolve against it. */
export interface FormFieldCandidate {
  id: bigint;
  name: string;
  type: FieldTypeName;
  /** Required by the table: every record needs a value, so every form must ask for one. */
  required: boolean;
}

/** What a form's request names, checked against its table's fields. */
export interface FormInput {
  name?: string | undefined;
  fields?: readonly string[] | undefined;
  required?: readonly string[] | undefined;
  successMessage?: string | undefined;
  redirectUrl?: string | undefined;
}

export interface CheckedForm {
  name?: string;
  fields?: number[];
  required?: number[];
  successMessage?: string;
  redirectUrl?: string;
  /** Set when the shown fields change and `required` is not given: which required ids stay. */
  keepRequired?: (id: number) => boolean;
}

const ALL_DIGITS = /^[0-9]+$/;

/**
 * Resolves a field reference as record routes do: all digits is an id, anything else a name
 * compared under foldName.
 */
function resolve(
  candidates: readonly FormFieldCandidate[],
  reference: string,
): FormFieldCandidate | undefined {
  if (ALL_DIGITS.test(reference)) {
    return candidates.find((field) => field.id.toString() === reference.replace(/^0+(?=.)/, ""));
  }
  const key = foldName(reference.trim());
  return candidates.find((field) => foldName(field.name) === key);
}

function resolveAll(
  candidates: readonly FormFieldCandidate[],
  references: readonly string[],
  key: string,
  items: ValidationItem[],
): { field: FormFieldCandidate; index: number }[] {
  const found: { field: FormFieldCandidate; index: number }[] = [];
  const seen = new Set<bigint>();
  references.forEach((reference, index) => {
    const field = resolve(candidates, reference);
    if (!field) {
      items.push({
        key: `${key}.${index}`,
        message: "is not a field of the table",
        source: "body",
        code: "not_found",
      });
    } else if (seen.has(field.id)) {
      items.push({
        key: `${key}.${index}`,
        message: "names a field twice",
        source: "body",
        code: "invalid_value",
      });
    } else {
      seen.add(field.id);
      found.push({ field, index });
    }
  });
  return found;
}

/**
 * Checks what a create or update sets, against the table's fields; `current` is the form's
 * field ids before an update (a `required` alone is checked against them). Every bad key is
 * listed in one validation failure; a field of a read-only or file type is
 * form_field_not_allowed. The fields a form shows must include every field its table requires.
 */
export function checkFormInput(
  input: FormInput,
  candidates: readonly FormFieldCandidate[],
  current: readonly number[] = [],
): CheckedForm {
  const items: ValidationItem[] = [];
  const checked: CheckedForm = {};
  if (input.name !== undefined) {
    const name = input.name.trim();
    const problem = nameProblem(name);
    if (problem) {
      items.push({
        key: "name",
        message: problem,
        source: "body",
        code: textProblemCode(name, problem),
      });
    }
    checked.name = name;
  }
  let shown = current;
  if (input.fields !== undefined) {
    if (input.fields.length < 1 || input.fields.length > MAX_FORM_FIELDS) {
      items.push({
        key: "fields",
        message: `must have 1-${MAX_FORM_FIELDS} items`,
        source: "body",
        code: "out_of_range",
      });
    }
    const fields = resolveAll(candidates, input.fields, "fields", items);
    if (items.length === 0 && fields.some(({ field }) => !formAllowsType(field.type))) {
      throw formFieldNotAllowed();
    }
    checked.fields = fields.map(({ field }) => Number(field.id));
    shown = checked.fields;
    // A form without a field the table requires could never add a record.
    for (const field of candidates) {
      if (field.required && !shown.includes(Number(field.id))) {
        items.push({
          key: "fields",
          message: `must include "${field.name}" (${field.id}): the table requires it`,
          source: "body",
          code: "required",
        });
      }
    }
  }
  if (input.required !== undefined) {
    const required = resolveAll(candidates, input.required, "required", items);
    for (const { field, index } of required) {
      if (!shown.includes(Number(field.id))) {
        items.push({
          key: `required.${index}`,
          message: "must be one of the form's fields",
          source: "body",
          code: "not_found",
        });
      }
    }
    checked.required = required.map(({ field }) => Number(field.id));
  } else if (input.fields !== undefined) {
    // Fields the form no longer shows are no longer required.
    const kept = new Set(checked.fields ?? []);
    checked.keepRequired = (id: number) => kept.has(id);
  }
  if (input.successMessage !== undefined) {
    const message = input.successMessage.trim();
    const problem = descriptionProblem(message);
    if (problem) {
      const code = textProblemCode(message, problem);
      items.push({ key: "success_message", message: problem, source: "body", code });
    }
    checked.successMessage = message;
  }
  if (input.redirectUrl !== undefined) {
    const url = input.redirectUrl.trim();
    const problem = redirectUrlProblem(url);
    if (problem) {
      const code = textProblemCode(url, problem);
      items.push({ key: "redirect_url", message: problem, source: "body", code });
    }
    checked.redirectUrl = url;
  }
  if (items.length > 0) throw validationFailed(items);
  return checked;
}
