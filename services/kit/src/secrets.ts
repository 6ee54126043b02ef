import { createHash, randomBytes, randomInt, timingSafeEqual } from "node:crypto";

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

/** A 6-digit code to mail (e-mail verification, owner transfer). */
export function newCode(): string {
  return randomInt(0, 1_000_000).toString().padStart(6, "0");
}

/** Secrets are stored only as SHA-256 digests (hex). */
export function sha256Hex(value: string | Uint8Array): string {
  return createHash("sha256").update(value).digest("hex");
}

/**
 * How a mailed code is stored: the digest of the code bound to what it is for (the account it
 * verifies; the organization and the member it hands ownership to), so that it is good there
 * only. `boundTo` and the code are joined by ':', as `7:123456`.
 */
export function codeHash(boundTo: readonly bigint[], code: string): string {
  return sha256Hex([...boundTo, code].join(":"));
}

/**
 * Whether `code` is the one a stored `codeHash` was made of for `boundTo`, compared in a time
 * that does not tell how much of the digest matched.
 */
export function codeMatches(storedHash: string, boundTo: readonly bigint[], code: string): boolean {
  const hash = codeHash(boundTo, code);
  return (
    storedHash.length === hash.length && timingSafeEqual(Buffer.from(storedHash), Buffer.from(hash))
  );
}
