import { Parser } from "htmlparser2";
import MarkdownIt from "markdown-it";
import sanitizeHtml from "sanitize-html";

/** How `long_text` values come out (the `rich_text` parameter, RichTextFormat). */
export type RichText = "markdown" | "html" | "plain";

/**
 * Raw HTML in the Markdown is text, not markup (`html: false`): `<script>` is shown, never run.
 * markdown-it also refuses `javascript:`, `vbscript:`, `file:` and most `data:` link targets.
 */
const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });

/**
 * For plain text the same Markdown is read with raw HTML recognised as HTML, so that its tags
 * (and a `<script>`'s body) are dropped rather than shown: plain output carries no tags at all.
 */
const markdownWithHtml = new MarkdownIt({ html: true, linkify: true, typographer: false });

/**
 * The sanitiser behind the renderer, so that safety never rests on one library alone: only
 * formatting tags, only http(s) and mailto links, images over http(s), no attribute but the
 * few listed (so no `on*=` handler and no `style`), and every link opened without giving the
 * target a handle on the page.
 */
const SANITIZE: sanitizeHtml.IOptions = {
  allowedTags: [
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "p",
    "br",
    "hr",
    "blockquote",
    "pre",
    "code",
    "em",
    "strong",
    "s",
    "del",
    "ul",
    "ol",
    "li",
    "a",
    "img",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
  ],
  allowedAttributes: {
    a: ["href", "title", "rel"],
    img: ["src", "alt", "title"],
    ol: ["start"],
    th: ["style"],
    td: ["style"],
    code: ["class"],
  },
  allowedClasses: { code: ["language-*"] },
  allowedStyles: { "*": { "text-align": [/^(left|right|center)$/] } },
  allowedSchemes: ["http", "https", "mailto"],
  allowedSchemesByTag: { img: ["http", "https"] },
  allowProtocolRelative: false,
  disallowedTagsMode: "discard",
  transformTags: {
    a: (tagName, attribs) => ({
      tagName,
      attribs: { ...attribs, rel: "noopener noreferrer" },
    }),
  },
};

/** Markdown rendered to sanitised HTML. */
export function markdownToHtml(source: string): string {
  return sanitizeHtml(markdown.render(source), SANITIZE);
}

type Token = ReturnType<typeof markdownWithHtml.parse>[number];

/** The text of inline tokens: words, code, image descriptions; breaks as line breaks. */
function inlineText(tokens: readonly Token[]): string {
  let text = "";
  let hidden = false;
  for (const token of tokens) {
    // The body of an inline <script> or <style> is code, not words.
    if (token.type === "html_inline") {
      if (/^<(script|style)\b/i.test(token.content)) hidden = true;
      else if (/^<\/(script|style)\s*>/i.test(token.content)) hidden = false;
      continue;
    }
    if (hidden) continue;
    if (token.type === "text" || token.type === "code_inline") text += token.content;
    else if (token.type === "softbreak" || token.type === "hardbreak") text += "\n";
    else if (token.type === "image") text += inlineText(token.children ?? []);
  }
  return text;
}

/** The words of a block of raw HTML: its text, entities decoded, without script and style. */
function htmlBlockText(html: string): string {
  let text = "";
  let hidden = 0;
  const code = (name: string) => name === "script" || name === "style";
  const parser = new Parser(
    {
      onopentagname: (name) => {
        if (code(name)) hidden += 1;
      },
      onclosetag: (name) => {
        if (code(name) && hidden > 0) hidden -= 1;
      },
      ontext: (data) => {
        if (hidden === 0) text += data;
      },
    },
    { decodeEntities: true },
  );
  parser.end(html);
  return text;
}

/**
 * Markdown as text only: the words of paragraphs, headings, list items, quotes, code, table
 * cells and raw HTML blocks, blocks separated by a blank line, without markup, HTML tags (and
 * the bodies of script and style) or entities (`a &amp; b` is `a & b`).
 */
export function markdownToPlain(source: string): string {
  const blocks: string[] = [];
  let cells: string[] | undefined;
  for (const token of markdownWithHtml.parse(source, {})) {
    if (token.type === "tr_open") cells = [];
    else if (token.type === "tr_close") {
      blocks.push((cells ?? []).join("\t"));
      cells = undefined;
    } else if (token.type === "inline") {
      const text = inlineText(token.children ?? []);
      if (cells) cells.push(text);
      else blocks.push(text);
    } else if (token.type === "fence" || token.type === "code_block") {
      blocks.push(token.content.replace(/\n$/, ""));
    } else if (token.type === "html_block") {
      blocks.push(htmlBlockText(token.content));
    }
  }
  return blocks
    .map((block) => block.trimEnd())
    .filter((block) => block.trim() !== "")
    .join("\n\n")
    .trim();
}

/** A stored long_text value in the requested format. */
export function renderRichText(source: string, format: RichText): string {
  if (format === "html") return markdownToHtml(source);
  if (format === "plain") return markdownToPlain(source);
  return source;
}
