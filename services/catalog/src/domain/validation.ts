import {
  Code,
  type ConnectError,
  domainError,
  trimmedOrRefused,
  validationFailed,
} from "@rowbase/kit";
import { codePointLength, nameProblem, type OptionError } from "@rowbase/kit/field-types";

/** Options that do not fit their type; the gateway answers `data.errors` from `errors`. */
export function invalidFieldOptions(errors: OptionError[]): ConnectError {
  return domainError(Code.InvalidArgument, "invalid_field_options", {
    errors: JSON.stringify(errors),
  });
}

export const DESCRIPTION_MAX = 1_000;

const CONTROL_BUT_LINE_BREAKS_AND_TABS = /[^\P{Cc}\t\n\r]/u;

/**
 * What is wrong with a field's name (trimmed): what is wrong with any name, or that it is
 * `__proto__`, a key no JSON body may hold (the gateway refuses it), so records could not be
 * written by it.
 */
export function fieldNameProblem(name: string): string | undefined {
  return nameProblem(name) ?? (name === "__proto__" ? 'must not be "__proto__"' : undefined);
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

/**
 * A name from a request, trimmed, or a validation failure keyed `key`: names of databases and
 * tables follow the rule for every name (SPEC section 6), fields' `fieldNameProblem`.
 */
export function requiredName(raw: string, key = "name", problemOf = nameProblem): string {
  return trimmedOrRefused(raw, key, problemOf);
}

export function requiredDescription(raw: string, key = "description"): string {
  const checked = checkDescription(raw);
  if ("problem" in checked) {
    throw validationFailed([{ key, message: checked.problem, source: "body" }]);
  }
  return checked.description;
}
