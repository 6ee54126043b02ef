import { describe, expect, it } from "vitest";
import { markdownToHtml, markdownToPlain, renderRichText } from "./rich-text.js";

describe("rich text as HTML", () => {
  it("renders Markdown", () => {
    expect(markdownToHtml("# Title\n\nSome **bold** and `code`.")).toBe(
      "<h1>Title</h1>\n<p>Some <strong>bold</strong> and <code>code</code>.</p>\n",
    );
  });

  it("shows raw HTML as text, so a script never runs", () => {
    const html = markdownToHtml('<script>alert("x")</script>\n\n<img src=x onerror=alert(1)>');
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/<img/i);
    expect(html).toContain("&lt;script&gt;");
  });

  it("drops javascript:, vbscript: and data: links but keeps http(s) and mailto", () => {
    for (const target of [
      "javascript:alert(1)",
      "JaVaScRiPt:alert(1)",
      "vbscript:msgbox(1)",
      "data:text/html;base64,PHNjcmlwdD4=",
      "java\tscript:alert(1)",
    ]) {
      const html = markdownToHtml(`[click](${target}) <${target}>`);
      // At most harmless text: no link carries the target.
      expect(html, target).not.toMatch(/href="\s*(java|vb)?\s*script:/i);
      expect(html, target).not.toMatch(/href="\s*data:/i);
    }
    expect(markdownToHtml("[site](https://example.com)")).toBe(
      '<p><a href="https://example.com" rel="noopener noreferrer">site</a></p>\n',
    );
    expect(markdownToHtml("<mailto:ada@example.com>")).toContain('href="mailto:ada@example.com"');
  });

  it("keeps no event handler attribute (an onerror= in a title is escaped text)", () => {
    const html = markdownToHtml(
      '![x" onerror="alert(1)](https://example.com/a.png "t\\" onload=\\"x")',
    );
    expect(html).not.toMatch(/\son\w+\s*=\s*["']/i);
    expect(html).toContain("&quot; onerror=&quot;");
  });

  it("links bare URLs", () => {
    expect(markdownToHtml("see https://example.com")).toContain(
      '<a href="https://example.com" rel="noopener noreferrer">',
    );
  });
});

describe("rich text as plain text", () => {
  it("keeps the words without markup or entities", () => {
    expect(
      markdownToPlain("# Title\n\nSome **bold** & [a link](https://x.dev).\n\n- one\n- two"),
    ).toBe("Title\n\nSome bold & a link.\n\none\n\ntwo");
  });

  it("drops raw HTML tags and script bodies, keeping the words between tags", () => {
    expect(markdownToPlain("a <b>hi</b> b")).toBe("a hi b");
    expect(markdownToPlain("<script>alert(1)</script>\n\nafter")).toBe("after");
    expect(markdownToPlain("<img src=x onerror=alert(1)>")).toBe("");
    expect(markdownToPlain("Hello <script>alert('x')</script> world")).toBe("Hello  world");
  });

  it("keeps the words of raw HTML blocks, entities decoded", () => {
    expect(
      markdownToPlain("<div>Important words</div>\n\n<p>Second paragraph</p>\n\nvisible"),
    ).toBe("Important words\n\nSecond paragraph\n\nvisible");
    expect(markdownToPlain("<style>body{}</style> hello &amp; &lt;x&gt;")).toBe("hello & <x>");
    expect(markdownToPlain("<div>\n<script>alert(1)</script>kept\n</div>")).toBe("kept");
  });

  it("keeps code", () => {
    expect(markdownToPlain("```\nlet a = 1;\n```")).toBe("let a = 1;");
  });
});

it("gives Markdown back as stored", () => {
  expect(renderRichText("**x**", "markdown")).toBe("**x**");
});
