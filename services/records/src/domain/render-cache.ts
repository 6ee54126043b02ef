import { createHash } from "node:crypto";
import type { RichText } from "./rich-text.js";

/**
 * The key of a long text of a table in a format: a SHA-256 of the three. A hash rather than the
 * text itself, because V8 hashes a string of more than 16,383 characters by its length alone:
 * long texts of one length would all share a bucket of a Map keyed by them, and a page of 1000
 * such values (100,000 characters, one prefix) takes seconds of comparisons to look up. The
 * hash also keeps the cache from holding the source texts. The table is part of the key so
 * that how fast an answer comes never tells one organization what another one stores.
 */
export function renderKey(tableId: bigint, format: RichText, source: string): string {
  return createHash("sha256").update(`${tableId}\0${format}\0`).update(source).digest("base64");
}

/**
 * Rendered long texts by `renderKey`, the least recently used dropped first once the texts
 * hold more than `maxChars` characters: rendering is a pure function of the text, so a text
 * read again (a page listed again, a client polling) costs a hash instead of a render.
 */
export class RenderCache {
  /** In order of use, the most recent last (a Map keeps insertion order). */
  private readonly texts = new Map<string, string>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  get(key: string): string | undefined {
    const text = this.texts.get(key);
    if (text === undefined) return undefined;
    this.texts.delete(key);
    this.texts.set(key, text);
    return text;
  }

  set(key: string, text: string): void {
    if (text.length > this.maxChars) return;
    const old = this.texts.get(key);
    if (old !== undefined) {
      this.texts.delete(key);
      this.chars -= old.length;
    }
    this.texts.set(key, text);
    this.chars += text.length;
    for (const [oldest, dropped] of this.texts) {
      if (this.chars <= this.maxChars) break;
      this.texts.delete(oldest);
      this.chars -= dropped.length;
    }
  }
}
