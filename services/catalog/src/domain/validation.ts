import { Code, type ConnectError, domainError } from "@rowbase/kit";
import { codePointLength, hasVisibleCharacter, type OptionError } from "@rowbase/kit/field-types";

/** The gateway turns this reason into its 400 validation envelope (SPEC section 1). */
export const VALIDATION_REASON = "validation_failed";

export interface ValidationItem {
  key: string;
  message: string;
  source: "body" | "query" | "path" | "header";
}

/** A request refused field by field; `extra` carries the items as JSON. */
export function validationFailed(...items: ValidationItem[]): ConnectError {
  return domainError(Code.InvalidArgument, VALIDATION_REASON, { extra: JSON.stringify(items) });
}

/** Options that do not fit their type; the gateway answers `data.errors` from `errors`. */
export function invalidFieldOptions(errors: OptionError[]): ConnectError {
  return domainError(Code.InvalidArgument, "invalid_field_options", {
    errors: JSON.stringify(errors),
  });
}

export const NAME_MAX = 100;
export const DESCRIPTION_MAX = 1_000;

/**
 * C0 and C1 control characters (NUL, line breaks, escapes) and bidirectional controls (U+202E
 * ...), as the gateway's checks of names.
 */
const CONTROL = /[\p{Cc}\p{Bidi_Control}]/u;
const CONTROL_BUT_LINE_BREAKS_AND_TABS = /[^\P{Cc}\t\n\r]/u;

/**
 * A database, table or field name (SPEC section 6): trimmed, 1-100 characters (code points, as
 * the tables' constraints count them), no control characters, not only invisible ones. Returns the trimmed name, or what
 * is wrong with it.
 */
export function checkName(raw: string): { name: string } | { problem: string } {
  const name = raw.trim();
  const length = codePointLength(name);
  if (length < 1 || length > NAME_MAX) {
    return { problem: `must be 1-${NAME_MAX} characters` };
  }
  if (CONTROL.test(name)) return { problem: "must not contain control characters" };
  if (!hasVisibleCharacter(name)) return { problem: "must contain a visible character" };
  if (!name.isWellFormed()) return { problem: "must be valid Unicode" };
  return { name };
}

/**
 * A field's name: a name (`checkName`) other than `__proto__`, a key no JSON body may hold (the
 * gateway refuses it), so records could not be written by it.
 */
export function checkFieldName(raw: string): { name: string } | { problem: string } {
  const checked = checkName(raw);
  return "name" in checked && checked.name === "__proto__"
    ? { problem: 'must not be "__proto__"' }
    : checked;
}

/**
 * A description (SPEC section 6 leaves it open; the gateway's rule): trimmed, at most 1000
 * characters, line breaks and tabs allowed, other control characters (NUL among them, which
 * PostgreSQL text cannot hold) refused. Empty clears it.
 */
export function checkDescription(raw: string): { description: string } | { problem: string } {
  const description = raw.trim();
  if (codePointLength(description) > DESCRIPTION_MAX) {
    return { problem: `must be at most ${DESCRIPTION_MAX} characters` };
  }
  if (CONTROL_BUT_LINE_BREAKS_AND_TABS.test(description)) {
    return { problem: "must not contain control characters other than tabs and line breaks" };
  }
  if (!description.isWellFormed()) return { problem: "must be valid Unicode" };
  return { description };
}

/** A name from a request, or a validation failure keyed `key`. */
export function requiredName(raw: string, key = "name", check = checkName): string {
  const checked = check(raw);
  if ("problem" in checked) {
    throw validationFailed({ key, message: checked.problem, source: "body" });
  }
  return checked.name;
}

export function requiredDescription(raw: string, key = "description"): string {
  const checked = checkDescription(raw);
  if ("problem" in checked) {
    throw validationFailed({ key, message: checked.problem, source: "body" });
  }
  return checked.description;
}
