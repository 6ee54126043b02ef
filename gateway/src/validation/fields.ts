import { z } from "zod";

/**
 * Field schemas shared by the route groups, with the messages clients see in the validation
 * envelope's `extra`.
 */

/** Trimmed and lower-cased before the format check, as SPEC section 4 normalises e-mails. */
export const email = z
  .string()
  .trim()
  .toLowerCase()
  .max(254, "must be at most 254 characters")
  .email({ message: "must be a valid e-mail address" })
  .describe("E-mail address; surrounding spaces are dropped and it is lower-cased");

export const password = z
  .string()
  .min(8, "must be 8-128 characters")
  .max(128, "must be 8-128 characters");

/** No C0/C1 control characters (newlines, NUL, escapes) in names shown to people. */
const NO_CONTROL_CHARACTERS = /^[^\p{Cc}]*$/u;

/** A display name: 1-100 characters once trimmed, no control characters (SPEC section 6). */
export const name = z
  .string()
  .trim()
  .min(1, "must be 1-100 characters")
  .max(100, "must be 1-100 characters")
  .regex(NO_CONTROL_CHARACTERS, "must not contain control characters");

/** The 6-digit code mailed for e-mail verification and owner transfer. */
export const verificationCode = z.string().regex(/^[0-9]{6}$/, "must be 6 digits");
