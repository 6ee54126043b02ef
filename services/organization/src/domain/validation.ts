import { Code, type ConnectError, domainError } from "@rowbase/kit";
import { codePointLength, hasVisibleCharacter } from "@rowbase/kit/field-types";

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

export const NAME_MAX = 100;

/**
 * A display name (organization, API token): trimmed, 1-100 characters, no control characters,
 * not only invisible ones.
 * Returns the trimmed name, or what is wrong with it.
 */
export function checkName(raw: string): { name: string } | { problem: string } {
  const name = raw.trim();
  // Characters (code points), as the gateway counts them: an emoji is one, not two.
  const length = codePointLength(name);
  if (length < 1 || length > NAME_MAX) {
    return { problem: `must be 1-${NAME_MAX} characters` };
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  if (/[\u0000-\u001f\u007f]/.test(name)) return { problem: "must not contain control characters" };
  if (!hasVisibleCharacter(name)) return { problem: "must contain a visible character" };
  return { name };
}
