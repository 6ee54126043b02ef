import { EMAIL_MAX_LENGTH } from "@rowbase/kit/field-types";

/** A plausible address: one '@', something before it, a dotted domain, no spaces. */
export function isEmail(email: string): boolean {
  return email.length <= EMAIL_MAX_LENGTH && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email);
}
