import { Code, type ConnectError, domainError, trimmedOrRefused } from "@rowbase/kit";
import { descriptionProblem, nameProblem, type OptionError } from "@rowbase/kit/field-types";

/** Options that do not fit their type; the gateway answers `data.errors` from `errors`. */
export function invalidFieldOptions(errors: OptionError[]): ConnectError {
  return domainError(Code.InvalidArgument, "invalid_field_options", {
    errors: JSON.stringify(errors),
  });
}

/**
 * What is wrong with a field's name (trimmed): what is wrong with any name, or that it is
 * `__proto__`, a key no JSON body may hold (the gateway refuses it), so records could not be
 * written by it.
 */
export function fieldNameProblem(name: string): string | undefined {
  return nameProblem(name) ?? (name === "__proto__" ? 'must not be "__proto__"' : undefined);
}

/**
 * A name from a request, trimmed, or a validation failure keyed `key`: names of databases and
 * tables follow the rule for every name (`nameProblem`), fields' `fieldNameProblem`.
 */
export function requiredName(raw: string, key = "name", problemOf = nameProblem): string {
  return trimmedOrRefused(raw, key, problemOf);
}

/** A description from a request, trimmed, or a validation failure keyed `key`. */
export function requiredDescription(raw: string, key = "description"): string {
  return trimmedOrRefused(raw, key, descriptionProblem);
}
