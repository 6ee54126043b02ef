import { type FieldTypeName, isReadOnlyType } from "./types.js";

/**
 * The rules of a public form's definition that both the gateway (the request's 400) and catalog
 * (the stored form) apply.
 */

/** The most fields one form shows. */
export const MAX_FORM_FIELDS = 100;

/** The longest `redirect_url` of a form. */
export const MAX_REDIRECT_URL_LENGTH = 2_048;

/**
 * Whether a field of this type may be in a form: not read-only, not a file, and not a link (a
 * public submitter would name rows of another table, which the form never shows them).
 */
export function formAllowsType(type: FieldTypeName): boolean {
  return !isReadOnlyType(type) && type !== "file" && type !== "link";
}

const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * What is wrong with a form's redirect address: it must be absolute `https`, or `http` on the
 * local machine (for development), at most MAX_REDIRECT_URL_LENGTH characters, without a user
 * name or password. An empty string (no redirect) is fine.
 */
export function redirectUrlProblem(raw: string): string | undefined {
  if (raw === "") return undefined;
  if (raw.length > MAX_REDIRECT_URL_LENGTH) {
    return `must be at most ${MAX_REDIRECT_URL_LENGTH} characters`;
  }
  if (!URL.canParse(raw)) return "must be an absolute URL";
  const url = new URL(raw);
  const local = LOCAL_HOSTS.has(url.hostname);
  if (url.protocol !== "https:" && !(url.protocol === "http:" && local)) {
    return "must be https (or http on localhost)";
  }
  if (url.username || url.password) return "must not carry a user name or password";
  return undefined;
}
