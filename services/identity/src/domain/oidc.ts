import {
  emailProblem,
  NAME_MAX_LENGTH,
  nameProblem,
  normalizeEmail,
  replaceControlCharacters,
} from "@rowbase/kit/field-types";

/** How long a started sign-in waits for the provider's redirect: its `state` lives 10 minutes. */
export const SIGN_IN_TTL_SECONDS = 600;

/** What Rowbase asks the provider for: an ID token, the e-mail and the display name. */
export const OIDC_SCOPE = "openid email profile";

/**
 * The redirect URI of a sign-in: the default when the client names none, else the one it names
 * if the operator allowed it (compared as normalised URLs), else undefined. An open choice would
 * let anybody have codes for Rowbase's client sent to a page of theirs.
 */
export function chooseRedirectUri(
  requested: string,
  defaultUri: string,
  allowed: readonly string[],
): string | undefined {
  if (requested === "") return defaultUri;
  let href: string;
  try {
    href = new URL(requested).href;
  } catch {
    return undefined;
  }
  return allowed.includes(href) ? href : undefined;
}

/** What a sign-in takes from the provider's claims about the person. */
export interface OidcProfile {
  /** Normalised; undefined when the provider sent none or not an address. */
  email: string | undefined;
  /** Only the boolean `true` counts: a missing claim or the string "true" does not. */
  emailVerified: boolean;
  /** The `name` claim made fit for a display name (may be empty). */
  name: string;
}

export function profileOf(claims: Readonly<Record<string, unknown>>): OidcProfile {
  const raw = typeof claims.email === "string" ? claims.email.trim() : "";
  // Checked before lower-casing: an address of other letters than ASCII ones is refused rather
  // than folded onto another account's (the Kelvin sign U+212A lower-cases to "k").
  const email = emailProblem(raw) === undefined ? normalizeEmail(raw) : undefined;
  const rawName = typeof claims.name === "string" ? claims.name : "";
  const name = [...replaceControlCharacters(rawName, " ").toWellFormed().trim()]
    .slice(0, NAME_MAX_LENGTH)
    .join("")
    .trim();
  return {
    email,
    emailVerified: claims.email_verified === true,
    // Made fit above; what the rule for names still refuses (a name that shows nothing) is none.
    name: nameProblem(name) ? "" : name,
  };
}
