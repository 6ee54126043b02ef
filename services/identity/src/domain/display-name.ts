import { trimmedOrRefused } from "@rowbase/kit";
import { nameProblem } from "@rowbase/kit/field-types";

/**
 * A user's display name from a registration, trimmed: none (empty, what the gateway sends when
 * the body has no name) or one that the rule for every name takes. Else `validation_failed`
 * keyed `name`, as the gateway answers, so that a caller past it cannot store what it refuses.
 */
export function requiredDisplayName(raw: string): string {
  return trimmedOrRefused(raw, "name", (name) => (name === "" ? undefined : nameProblem(name)));
}
