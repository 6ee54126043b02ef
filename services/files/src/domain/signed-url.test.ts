import { describe, expect, it } from "vitest";
import { type FileUrlClaims, signFileUrl, verifyFileUrl } from "./signed-url.js";

const SECRET = "a-file-url-secret-of-at-least-32-characters";
const NOW = 1_800_000_000;
const claims: FileUrlClaims = {
  rowId: 12n,
  fieldId: 34n,
  fileId: 56n,
  generation: 2,
  expiresAt: NOW + 3600,
  download: true,
};

describe("signed file URLs", () => {
  it("round-trips and is URL-safe", () => {
    const token = signFileUrl(SECRET, claims);
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(verifyFileUrl(SECRET, token, NOW)).toEqual(claims);
  });

  it("accepts only the canonical spelling of the signature", () => {
    const token = signFileUrl(SECRET, claims);
    const last = token.at(-1)!;
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    // The last of 43 characters carries 4 bits of the MAC; its 2 low bits are padding.
    const index = alphabet.indexOf(last);
    const sameBytes = alphabet[index ^ 1]!;
    expect(Buffer.from(token.slice(-43, -1) + sameBytes, "base64url")).toEqual(
      Buffer.from(token.slice(-43), "base64url"),
    );
    expect(verifyFileUrl(SECRET, token.slice(0, -1) + sameBytes, NOW)).toBeUndefined();
  });

  it("expires", () => {
    const token = signFileUrl(SECRET, claims);
    expect(verifyFileUrl(SECRET, token, NOW + 3599)).toEqual(claims);
    expect(verifyFileUrl(SECRET, token, NOW + 3600)).toBeUndefined();
  });

  it("refuses another secret, a changed payload or signature, and garbage", () => {
    const token = signFileUrl(SECRET, claims);
    const [payload, signature] = token.split(".") as [string, string];
    expect(verifyFileUrl(`${SECRET}x`, token, NOW)).toBeUndefined();
    const forged = Buffer.from(
      Buffer.from(payload, "base64url").toString().replace(":56:", ":57:"),
    ).toString("base64url");
    expect(verifyFileUrl(SECRET, `${forged}.${signature}`, NOW)).toBeUndefined();
    const flipped = signature.startsWith("A") ? `B${signature.slice(1)}` : `A${signature.slice(1)}`;
    expect(verifyFileUrl(SECRET, `${payload}.${flipped}`, NOW)).toBeUndefined();
    for (const junk of ["", ".", "abc", `${payload}.`, `${token}.x`, token.toUpperCase()]) {
      expect(verifyFileUrl(SECRET, junk, NOW)).toBeUndefined();
    }
  });
});
