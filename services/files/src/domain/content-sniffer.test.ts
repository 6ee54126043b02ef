import { describe, expect, it } from "vitest";
import { ContentSniffer } from "./content-sniffer.js";

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);

async function sniff(...chunks: (string | Uint8Array)[]): Promise<string> {
  const sniffer = new ContentSniffer();
  for (const chunk of chunks) {
    sniffer.feed(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk);
  }
  return sniffer.contentType();
}

describe("ContentSniffer", () => {
  it("recognises binary formats by their bytes", async () => {
    expect(await sniff(PNG)).toBe("image/png");
    expect(await sniff(PNG.subarray(0, 5), PNG.subarray(5))).toBe("image/png");
    expect(await sniff(Buffer.from("%PDF-1.7\n%\u00e2\u00e3\n1 0 obj\n", "latin1"))).toBe(
      "application/pdf",
    );
  });

  it("finds HTML, SVG and XML in text, whatever the file claims to be", async () => {
    expect(await sniff("<!DOCTYPE html><html><script>alert(1)</script>")).toBe("text/html");
    expect(await sniff("\ufeff  \n<HTML>")).toBe("text/html");
    expect(await sniff("<script>alert(1)</script>")).toBe("text/html");
    expect(await sniff("<!-- comment -->")).toBe("text/html");
    expect(await sniff("<p>hi</p>")).toBe("text/html");
    expect(await sniff('<svg xmlns="http://www.w3.org/2000/svg"><script/></svg>')).toBe(
      "image/svg+xml",
    );
    expect(await sniff('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>')).toBe(
      "image/svg+xml",
    );
    expect(await sniff('<?xml version="1.0"?><root/>')).toBe("application/xml");
  });

  it("calls other UTF-8 text without NUL text/plain", async () => {
    expect(await sniff("hello, wörld ✓")).toBe("text/plain");
    expect(await sniff("<pre>not a sniffed tag")).toBe("text/plain");
    expect(await sniff("")).toBe("text/plain");
    // A multi-byte character split across two chunks is still valid UTF-8.
    const check = Buffer.from("✓", "utf8");
    expect(await sniff(check.subarray(0, 1), check.subarray(1))).toBe("text/plain");
  });

  it("calls anything else application/octet-stream", async () => {
    expect(await sniff("text with a \u0000 NUL")).toBe("application/octet-stream");
    expect(await sniff(Buffer.from([0xff, 0xfe, 0x41]))).toBe("application/octet-stream");
    expect(await sniff("fine", Buffer.from([0xc3]))).toBe("application/octet-stream");
    expect(await sniff(`${"a".repeat(70_000)}\u0000`)).toBe("application/octet-stream");
  });
});
