import { fileTypeFromBuffer } from "file-type";

/** How much of the start of a file the sniffer keeps (file-type needs 4100 bytes; zips more). */
const HEAD_BYTES = 64 * 1024;

const WHITESPACE = new Set([0x09, 0x0a, 0x0c, 0x0d, 0x20]);

/**
 * Tags that make a browser treat text as HTML when it sniffs (WHATWG MIME Sniffing, "identifying
 * a resource with an unknown MIME type"): the tag name must be followed by a space or `>`.
 */
const HTML_TAGS = [
  "!doctype html",
  "html",
  "head",
  "script",
  "iframe",
  "h1",
  "div",
  "font",
  "table",
  "a",
  "style",
  "title",
  "b",
  "body",
  "br",
  "p",
];

/**
 * Finds a file's content type from its bytes as they stream past, never from what the client
 * said: a binary format `file-type` recognises by its magic numbers; otherwise, for text (valid
 * UTF-8 without NUL, checked over the whole file), HTML, SVG or XML when it starts like them and
 * `text/plain` when not; anything else is `application/octet-stream`. Only the first 64 KiB are
 * kept.
 */
export class ContentSniffer {
  private head = Buffer.alloc(0);
  private readonly decoder = new TextDecoder("utf-8", { fatal: true });
  private text = true;

  /** Looks at the next chunk. */
  feed(chunk: Uint8Array): void {
    if (this.head.length < HEAD_BYTES) {
      const take = chunk.subarray(0, HEAD_BYTES - this.head.length);
      this.head = Buffer.concat([this.head, take]);
    }
    if (!this.text) return;
    if (chunk.includes(0)) {
      this.text = false;
      return;
    }
    try {
      this.decoder.decode(chunk, { stream: true });
    } catch {
      this.text = false;
    }
  }

  /** The content type of everything fed so far, as the whole file. */
  async contentType(): Promise<string> {
    if (this.text) {
      try {
        this.decoder.decode();
      } catch {
        this.text = false;
      }
    }
    const detected = await fileTypeFromBuffer(this.head).catch(() => undefined);
    if (detected) {
      if (detected.mime === "application/xml" && this.text && looksLikeSvg(this.head)) {
        return "image/svg+xml";
      }
      return detected.mime;
    }
    if (!this.text) return "application/octet-stream";
    return textType(this.head);
  }
}

/** The type of a text file from its start. */
export function textType(head: Buffer): string {
  let start = 0;
  if (head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) start = 3;
  while (start < head.length && WHITESPACE.has(head[start]!)) start += 1;
  const lead = head
    .subarray(start, start + 64)
    .toString("latin1")
    .toLowerCase();
  if (lead.startsWith("<!--")) return "text/html";
  for (const tag of HTML_TAGS) {
    const after = lead.charAt(tag.length + 1);
    if (
      lead.startsWith(`<${tag}`) &&
      (after === ">" || after === " " || WHITESPACE.has(after.charCodeAt(0)))
    ) {
      return "text/html";
    }
  }
  if (lead.startsWith("<svg")) return "image/svg+xml";
  if (lead.startsWith("<?xml")) return looksLikeSvg(head) ? "image/svg+xml" : "application/xml";
  return "text/plain";
}

function looksLikeSvg(head: Buffer): boolean {
  return /<svg[\s>]/i.test(head.toString("latin1"));
}
