import { describe, expect, it } from "vitest";
import { contentDisposition } from "./content-disposition.js";

/** The parameters as a client reads them back (RFC 6266 / 8187). */
function parse(header: string) {
  const [kind, ...params] = header.split("; ");
  const values = Object.fromEntries(
    params.map((p) => [p.slice(0, p.indexOf("=")), p.slice(p.indexOf("=") + 1)]),
  );
  return {
    kind,
    filename: values.filename,
    exact: decodeURIComponent(String(values["filename*"]).replace(/^UTF-8''/, "")),
    params: params.length,
  };
}

describe("contentDisposition", () => {
  it("names a plain file in both parameters", () => {
    expect(contentDisposition("inline", "report.pdf")).toBe(
      `inline; filename="report.pdf"; filename*=UTF-8''report.pdf`,
    );
    expect(contentDisposition("attachment", "a b.txt")).toBe(
      `attachment; filename="a b.txt"; filename*=UTF-8''a%20b.txt`,
    );
  });

  it("keeps a unicode name exactly in filename*, with an ASCII stand-in in filename", () => {
    const header = contentDisposition("attachment", "Grüße 😀 отчёт.pdf");
    expect(parse(header)).toEqual({
      kind: "attachment",
      filename: `"Gr__e _ _____.pdf"`,
      exact: "Grüße 😀 отчёт.pdf",
      params: 2,
    });
  });

  it("cannot be broken out of: quotes, backslashes, semicolons, CR/LF and NUL", () => {
    const header = contentDisposition(
      "inline",
      'x.png"; filename="evil.html\r\nSet-Cookie: a=b\u0000;\\',
    );
    expect(header).not.toMatch(/[\r\n\0]/);
    const parsed = parse(header);
    expect(parsed.params).toBe(2);
    expect(parsed.filename).toMatch(/^"[^"\\]*"$/);
    expect(parsed.exact).toBe('x.png"; filename="evil.htmlSet-Cookie: a=b;_');
    expect(header).toContain(
      "filename*=UTF-8''x.png%22%3B%20filename%3D%22evil.htmlSet-Cookie%3A%20a%3Db%3B_",
    );
  });

  it("never names a place to save to: separators and dot names", () => {
    expect(parse(contentDisposition("attachment", "../../etc/passwd")).exact).toBe(
      ".._.._etc_passwd",
    );
    expect(parse(contentDisposition("attachment", "..\\win.ini")).exact).toBe(".._win.ini");
    expect(parse(contentDisposition("attachment", "..")).exact).toBe("file");
    expect(parse(contentDisposition("attachment", " ")).exact).toBe("file");
    expect(parse(contentDisposition("attachment", "\u0000")).filename).toBe(`"file"`);
  });

  it("drops bidirectional overrides that disguise an extension, and lone surrogates", () => {
    expect(parse(contentDisposition("attachment", "invoice\u202efdp.exe")).exact).toBe(
      "invoicefdp.exe",
    );
    expect(parse(contentDisposition("attachment", "a\ud800b")).exact).toBe("a\ufffdb");
  });

  it("percent-encodes what is not an RFC 8187 attr-char, % and ' included", () => {
    const header = contentDisposition("inline", "100% it's (a)*.txt");
    expect(header).toBe(
      `inline; filename="100_ it's (a)*.txt"; filename*=UTF-8''100%25%20it%27s%20%28a%29%2A.txt`,
    );
  });
});
