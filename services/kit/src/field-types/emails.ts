/**
 * An account's e-mail address as it is compared and stored (SPEC section 4): trimmed and
 * lower-cased. The gateway normalises request bodies by it, identity the addresses it signs in
 * and registers, organization the addresses it invites, so that one address is one account
 * whichever way it reaches the database.
 */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}
