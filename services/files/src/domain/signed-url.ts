import { createHmac, timingSafeEqual } from "node:crypto";

/** What a signed file URL grants: one stored file of a pair, until `expiresAt`. */
export interface FileUrlClaims {
  rowId: bigint;
  fieldId: bigint;
  /** The file's row id: a later upload to the pair is another file, so the URL dies. */
  fileId: bigint;
  /** The file's URL generation, bumped when it is deleted, so the URL stays dead after restore. */
  generation: number;
  /** Unix seconds. */
  expiresAt: number;
  /** Serve as an attachment. */
  download: boolean;
}

const CONTEXT = "rowbase.file-url.v1.";
const TOKEN = /^([A-Za-z0-9_-]{1,200})\.([A-Za-z0-9_-]{43})$/;
const PAYLOAD = /^v1:([1-9]\d{0,18}):([1-9]\d{0,18}):([1-9]\d{0,18}):(\d{1,9}):(\d{1,12}):([01])$/;

function mac(secret: string, payload: string): Buffer {
  return createHmac("sha256", secret)
    .update(CONTEXT + payload)
    .digest();
}

/**
 * An opaque, URL-safe token: the claims in base64url and their HMAC-SHA256 under the shared
 * secret (domain-separated). Nothing in it is secret; everything in it is authenticated.
 */
export function signFileUrl(secret: string, claims: FileUrlClaims): string {
  const payload = [
    "v1",
    claims.rowId,
    claims.fieldId,
    claims.fileId,
    claims.generation,
    claims.expiresAt,
    claims.download ? 1 : 0,
  ].join(":");
  const encoded = Buffer.from(payload, "utf8").toString("base64url");
  return `${encoded}.${mac(secret, encoded).toString("base64url")}`;
}

/**
 * The claims of a token this secret signed that has not expired at `nowSeconds`; undefined for
 * anything else (malformed, tampered, signed with another secret, expired).
 */
export function verifyFileUrl(
  secret: string,
  token: string,
  nowSeconds: number,
): FileUrlClaims | undefined {
  const parts = TOKEN.exec(token);
  if (!parts) return undefined;
  const [, encoded, signature] = parts as unknown as [string, string, string];
  // Compared as text: base64url has several spellings of the same bytes (the unused low bits of
  // the last character), and only the one this service writes is accepted.
  const expected = Buffer.from(mac(secret, encoded).toString("base64url"));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  const fields = PAYLOAD.exec(Buffer.from(encoded, "base64url").toString("utf8"));
  if (!fields) return undefined;
  const [, rowId, fieldId, fileId, generation, expiresAt, download] = fields as unknown as string[];
  const claims: FileUrlClaims = {
    rowId: BigInt(rowId!),
    fieldId: BigInt(fieldId!),
    fileId: BigInt(fileId!),
    generation: Number(generation),
    expiresAt: Number(expiresAt),
    download: download === "1",
  };
  if (claims.expiresAt <= nowSeconds) return undefined;
  return claims;
}
