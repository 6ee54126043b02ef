import { createHash, randomBytes, randomInt } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** `length` characters of base62, uniformly (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

export const API_TOKEN_PATTERN = /^rb_[0-9A-Za-z]{40}$/;
/** How much of a token is shown to recognise it: "rb_" and 5 characters. */
export const TOKEN_PREFIX_LENGTH = 8;

/** An API token secret: `rb_` + 40 base62 characters (about 238 bits). */
export function newApiTokenSecret(): string {
  return `rb_${randomBase62(40)}`;
}

/** A 6-digit owner-transfer code. */
export function newCode(): string {
  return randomInt(0, 1_000_000).toString().padStart(6, "0");
}

/** Secrets are stored only as SHA-256 digests (hex). */
export function sha256Hex(value: string | Uint8Array): string {
  return createHash("sha256").update(value).digest("hex");
}
