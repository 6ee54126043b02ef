import { textProblemCode } from "@rowbase/kit";
import {
  DESCRIPTION_MAX_LENGTH,
  DESCRIPTION_PATTERN,
  descriptionProblem,
  EMAIL_MAX_LENGTH,
  EMAIL_PATTERN,
  emailProblem,
  NAME_MAX_LENGTH,
  nameProblem,
  normalizeEmail,
} from "@rowbase/kit/field-types";
import { z } from "zod";
import { givenOnce } from "./query-values.js";

/**
 * Field schemas shared by the route groups, with the messages clients see in the validation
 * envelope's `extra`.
 */

/**
 * Normalised before the check, by the rule the services store addresses by, then checked by
 * the rule for an account's address (`emailProblem`) that organization and identity apply too.
 */
export const email = z
  .string()
  .overwrite(normalizeEmail)
  .superRefine(refusing(emailProblem))
  .meta({ maxLength: EMAIL_MAX_LENGTH, format: "email", pattern: EMAIL_PATTERN })
  .describe("E-mail address; surrounding spaces are dropped and it is lower-cased");

export const password = z
  .string()
  .min(8, "must be 8-128 characters")
  .max(128, "must be 8-128 characters")
  // Sent on as UTF-8, an unpaired surrogate would become U+FFFD: another password than typed.
  .refine((value) => value.isWellFormed(), "must be valid Unicode");

/**
 * The characters `nameProblem` refuses as controls (C0 and C1 controls, and Unicode's
 * Bidi_Control set), spelled for a JSON Schema pattern: the documents' version of the rule.
 */
export const CONTROL_CHARACTER_CLASS = "\\p{Cc}\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069";

/**
 * Adds the problem `problemOf` finds in a string, if any, as the value's issue, with the code
 * of a text rule's problem (too short, too long, or an invalid value).
 */
export function refusing(problemOf: (value: string) => string | undefined) {
  return (value: string, ctx: z.RefinementCtx) => {
    const problem = problemOf(value);
    if (problem) {
      const code = textProblemCode(value, problem);
      ctx.addIssue({ code: "custom", message: problem, input: value, params: { code } });
    }
  };
}

/**
 * A display name (organization, API token, user, database, table, field), trimmed, by the one
 * rule for names the services apply too (`nameProblem`). Characters are code points, as JSON
 * Schema's `maxLength` counts them: an emoji is one, not the two UTF-16 units of `length`.
 */
export const name = z
  .string()
  .trim()
  .superRefine(refusing(nameProblem))
  // For the document: as sent, before the trim, something other than blanks, and none of the
  // characters the rule refuses as controls.
  .meta({
    minLength: 1,
    maxLength: NAME_MAX_LENGTH,
    pattern: `^(?=[\\s\\S]*\\S)[^${CONTROL_CHARACTER_CLASS}]*$`,
  });

/**
 * A free-text description of a database, table or field, trimmed, by the rule catalog applies
 * too (`descriptionProblem`). An empty string clears it.
 */
export const description = z
  .string()
  .trim()
  .superRefine(refusing(descriptionProblem))
  .meta({ maxLength: DESCRIPTION_MAX_LENGTH, pattern: DESCRIPTION_PATTERN })
  .describe(
    `At most ${DESCRIPTION_MAX_LENGTH} characters once trimmed; tabs and line breaks allowed, ` +
      "other control characters not; an empty string clears it",
  );

/** The 6-digit code mailed for e-mail verification and owner transfer. */
export const verificationCode = z.string().regex(/^[0-9]{6}$/, "must be 6 digits");

/** The largest id a JSON number carries exactly: ids stay below 2^53. */
export const MAX_ID = Number.MAX_SAFE_INTEGER;

const ID_MESSAGE = `must be an integer between 1 and ${MAX_ID}`;

/** An integer id in a JSON body, as the bigint the protobuf int64 takes. */
export const bodyId = z
  .number()
  .int({ error: ID_MESSAGE })
  .min(1, ID_MESSAGE)
  .transform((value) => BigInt(value));

/**
 * An integer id in the query string or the path. Only plain digits are read (no sign, decimal
 * point, exponent, hex or spaces, which `Number()` would accept, and no leading zero, so that
 * one resource has one address); a repeated parameter is refused rather than one of its values
 * picked. The preprocess step keeps the document's type `integer`.
 */
export const queryId = z.preprocess(
  (value, ctx) => {
    if (givenOnce(value, ctx) && typeof value === "string") {
      if (/^(0|[1-9][0-9]*)$/.test(value)) return Number(value);
      ctx.addIssue({ code: "custom", message: ID_MESSAGE, input: value });
    }
    return value;
  },
  // The bigint conversion stays inside: a preprocess step that is outermost is what tells the
  // document generator that the parameter is required (a transform alone accepts absence).
  z
    .number()
    .int({ error: ID_MESSAGE })
    .min(1, ID_MESSAGE)
    .transform((value) => BigInt(value)),
);

/** An organization's URL name: 3-48 of a-z, 0-9 and -. */
export const organizationSlug = z
  .string()
  .regex(/^[a-z0-9-]{3,48}$/, "must be 3-48 characters of a-z, 0-9 and -")
  .describe("3-48 characters of a-z, 0-9 and -; unique");

/** One of a fixed set of names; the message lists them (a missing value is "is required"). */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  const message = `must be one of ${values.join(", ")}`;
  return z.enum(values, {
    error: (issue) => (issue.input === undefined ? "is required" : message),
  });
}
