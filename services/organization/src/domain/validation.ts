import { Code, type ConnectError, domainError } from "@rowbase/kit";
import { nameProblem } from "@rowbase/kit/field-types";

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

/**
 * A display name (organization, API token) from a request, trimmed, by the rule for every name
 * (SPEC section 6); else a validation failure keyed `name`.
 */
export function requiredName(raw: string): string {
  const name = raw.trim();
  const problem = nameProblem(name);
  if (problem) throw validationFailed({ key: "name", message: problem, source: "body" });
  return name;
}
