import { QueryError } from "./query-error.js";
import type { Literal } from "./where-ast.js";

/** A token of the structure around conditions. */
export type StructureToken =
  | { kind: "(" | ")" | "," | "~and" | "~or" | "~not" | "end"; position: number }
  | { kind: "unexpected"; text: string; position: number };

const WHITESPACE = new Set([" ", "\t", "\n", "\r"]);
const CONNECTIVES: ReadonlyMap<string, "~and" | "~or" | "~not"> = new Map([
  ["and", "~and"],
  ["or", "~or"],
  ["not", "~not"],
]);
const WORD = /^[A-Za-z]$/;
const UNEXPECTED_MAX = 20;

/**
 * The scanner of `where`. The grammar is context-sensitive at the character level (a value is
 * "raw text up to the closing )", so a comma means one thing in a reference and another in a
 * value), so the parser says what it expects next and the lexer reads that: structure tokens,
 * a reference, an operator word, a value or a list item.
 *
 * It works on code points, so every index + 1 is the 1-based position reported to the client.
 */
export class WhereLexer {
  private index = 0;

  constructor(private readonly chars: readonly string[]) {}

  /** The 1-based position of the next character that is not whitespace (length + 1 at the end). */
  position(): number {
    this.skipWhitespace();
    return this.index + 1;
  }

  /** The next character that is not whitespace, without consuming it. */
  peekChar(): string | undefined {
    this.skipWhitespace();
    return this.chars[this.index];
  }

  peek(): StructureToken {
    const saved = this.index;
    const token = this.next();
    this.index = saved;
    return token;
  }

  next(): StructureToken {
    this.skipWhitespace();
    const position = this.index + 1;
    const char = this.chars[this.index];
    if (char === undefined) return { kind: "end", position };
    if (char === "(" || char === ")" || char === ",") {
      this.index++;
      return { kind: char, position };
    }
    if (char === "~") {
      let end = this.index + 1;
      while (end < this.chars.length && WORD.test(this.chars[end]!)) end++;
      const word = this.chars.slice(this.index + 1, end).join("");
      const connective = CONNECTIVES.get(word.toLowerCase());
      if (connective) {
        this.index = end;
        return { kind: connective, position };
      }
      return { kind: "unexpected", text: `~${word}`, position };
    }
    let end = this.index;
    while (
      end < this.chars.length &&
      end - this.index < UNEXPECTED_MAX &&
      !WHITESPACE.has(this.chars[end]!) &&
      !"(),~".includes(this.chars[end]!)
    ) {
      end++;
    }
    return { kind: "unexpected", text: this.chars.slice(this.index, end).join(""), position };
  }

  /** A field reference: a quoted string, or raw text up to "," or ")" with its ends trimmed. */
  readReference(): Literal {
    return this.readText(",)");
  }

  /** An operator word: raw text up to "," or ")", trimmed. */
  readOperator(): Literal {
    this.skipWhitespace();
    return this.readRaw(",)");
  }

  /** A single value: a quoted string, or raw text up to the closing ")" (commas included). */
  readValue(): Literal {
    return this.readText(")");
  }

  /** One item of a list value: a quoted string, or raw text up to "," or ")". */
  readItem(): Literal {
    return this.readText(",)");
  }

  private readText(stops: string): Literal {
    this.skipWhitespace();
    return this.chars[this.index] === '"' ? this.readQuoted() : this.readRaw(stops);
  }

  private readRaw(stops: string): Literal {
    const position = this.index + 1;
    const start = this.index;
    while (this.index < this.chars.length && !stops.includes(this.chars[this.index]!)) {
      this.index++;
    }
    let end = this.index;
    while (end > start && WHITESPACE.has(this.chars[end - 1]!)) end--;
    return { text: this.chars.slice(start, end).join(""), position };
  }

  /** `"..."` with `""` standing for one quote; the lexer stops right after the closing quote. */
  private readQuoted(): Literal {
    const position = this.index + 1;
    const parts: string[] = [];
    this.index++;
    for (;;) {
      const char = this.chars[this.index];
      if (char === undefined) throw new QueryError("where", "unterminated quoted text", position);
      this.index++;
      if (char === '"') {
        if (this.chars[this.index] !== '"') return { text: parts.join(""), position };
        this.index++;
      }
      parts.push(char);
    }
  }

  private skipWhitespace(): void {
    while (this.index < this.chars.length && WHITESPACE.has(this.chars[this.index]!)) {
      this.index++;
    }
  }
}
