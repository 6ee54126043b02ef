import { randomBase62 } from "@rowbase/kit";

export const API_TOKEN_PATTERN = /^rb_[0-9A-Za-z]{40}$/;
/** How much of a token is shown to recognise it: "rb_" and 5 characters. */
export const TOKEN_PREFIX_LENGTH = 8;

/** An API token secret: `rb_` + 40 base62 characters (about 238 bits). */
export function newApiTokenSecret(): string {
  return `rb_${randomBase62(40)}`;
}
