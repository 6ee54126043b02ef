import { trimmedOrRefused } from "@rowbase/kit";
import { nameProblem } from "@rowbase/kit/field-types";

/**
 * A display name (organization, API token) from a request, trimmed, by the rule for every name
 * (`nameProblem`); else a validation failure keyed `name`.
 */
export function requiredName(raw: string): string {
  return trimmedOrRefused(raw, "name", nameProblem);
}
