/** E-mail addresses are compared and stored lower-cased and trimmed, as identity stores them. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** A plausible address: one '@', something before it, a dotted domain, no spaces. */
export function isEmail(email: string): boolean {
  return email.length <= 254 && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email);
}
