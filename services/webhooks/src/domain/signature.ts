import { createHmac, randomBytes } from "node:crypto";

/**
 * Standard Webhooks signing: every delivery carries `webhook-id` (the same on each retry of one
 * change), `webhook-timestamp` (Unix seconds) and `webhook-signature`, `v1,<base64 of
 * HMAC-SHA256 over "{id}.{timestamp}.{body}">` keyed with the base64-decoded part of a
 * `whsec_` secret. During a rotation both secrets sign, the signatures separated by a space, so
 * a receiver that still holds the old secret keeps verifying.
 */

const PREFIX = "whsec_";

/** A new secret: `whsec_` and the base64 of 32 random bytes. */
export function newSecret(): string {
  return `${PREFIX}${randomBytes(32).toString("base64")}`;
}

/** Whether a text is a secret of that form. */
export function isSecret(text: string): boolean {
  if (!text.startsWith(PREFIX)) return false;
  const key = text.slice(PREFIX.length);
  return /^[A-Za-z0-9+/]+={0,2}$/.test(key) && Buffer.from(key, "base64").length === 32;
}

function signature(secret: string, content: string): string {
  const key = Buffer.from(secret.slice(PREFIX.length), "base64");
  return `v1,${createHmac("sha256", key).update(content).digest("base64")}`;
}

/** The signing headers of one attempt: one signature per secret, newest first. */
export function signedHeaders(
  secrets: readonly string[],
  id: string,
  timestamp: number,
  body: string,
): Record<string, string> {
  if (secrets.length === 0) throw new Error("a delivery is signed with at least one secret");
  const content = `${id}.${timestamp}.${body}`;
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": secrets.map((secret) => signature(secret, content)).join(" "),
  };
}
