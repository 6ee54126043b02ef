import { EMAIL_LOCAL_MAX_LENGTH, EMAIL_MAX_LENGTH } from "./values.js";

/**
 * An account's e-mail address as it is compared and stored: trimmed and
 * lower-cased. The gateway normalises request bodies by it, identity the addresses it signs in
 * and registers, organization the addresses it invites, so that one address is one account
 * whichever way it reaches the database.
 */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * The format of an account's address, as a pattern documents can show too: dot-separated ASCII
 * words before the '@', a domain of ASCII labels ending in one of letters. ASCII only, because
 * lower-casing folds some other letters onto ASCII ones (the Kelvin sign U+212A onto "k").
 */
export const EMAIL_PATTERN =
  "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$";
const EMAIL_FORMAT = new RegExp(EMAIL_PATTERN);

/**
 * The rule for an account's address, the one the gateway checks request bodies by, organization
 * invitations by and identity a provider's address by: at most 254 characters in whole and 64
 * before the '@' (RFC 5321), in `EMAIL_PATTERN`'s format. Returns what is wrong with it (one
 * problem), or undefined. A record's `email` field takes more (`validateValue`): that is data, not
 * an account.
 *
 * The gateway and organization apply it to the normalised address; identity to the provider's
 * address before lower-casing, so that a non-ASCII one is refused rather than folded onto the
 * address of another account.
 */
export function emailProblem(address: string): string | undefined {
  if (address.length > EMAIL_MAX_LENGTH) return `must be at most ${EMAIL_MAX_LENGTH} characters`;
  if (!EMAIL_FORMAT.test(address)) return "must be a valid e-mail address";
  if (address.indexOf("@") > EMAIL_LOCAL_MAX_LENGTH) {
    return `must have at most ${EMAIL_LOCAL_MAX_LENGTH} characters before the @`;
  }
  return undefined;
}
