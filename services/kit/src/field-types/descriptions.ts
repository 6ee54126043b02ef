import { codePointLength } from "./names.js";

/** The longest description of a database, table or field. */
export const DESCRIPTION_MAX_LENGTH = 1_000;

/**
 * The characters a description may hold, as a pattern (with the `u` flag) that documents can
 * show too: line breaks and tabs are text in a description; other control characters are not.
 */
export const DESCRIPTION_PATTERN = "^[\\P{Cc}\\t\\n\\r]*$";
const DESCRIPTION_CHARACTERS = new RegExp(DESCRIPTION_PATTERN, "u");

/**
 * The rule for the free-text description of a database, table or field: at most 1000
 * characters (code points), line breaks and tabs allowed, other control characters (NUL among
 * them, which PostgreSQL text cannot hold) refused, valid Unicode. Empty is allowed: it clears
 * the description. `description` is as it will be stored, so already trimmed. Returns what is
 * wrong with it, or undefined.
 */
export function descriptionProblem(description: string): string | undefined {
  if (codePointLength(description) > DESCRIPTION_MAX_LENGTH) {
    return `must be at most ${DESCRIPTION_MAX_LENGTH} characters`;
  }
  if (!DESCRIPTION_CHARACTERS.test(description)) {
    return "must not contain control characters other than tabs and line breaks";
  }
  if (!description.isWellFormed()) return "must be valid Unicode";
  return undefined;
}
