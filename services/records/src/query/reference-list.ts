import { REFERENCE_LIST_MAX_LENGTH } from "@rowbase/kit";
import { QueryError, type QueryParameter } from "./query-error.js";
import type { Literal } from "./where-ast.js";

const WHITESPACE = new Set([" ", "\t", "\n", "\r"]);

export interface ListedReference extends Literal {
  /** A `-` stood before it (only where `descending` is allowed). */
  descending: boolean;
}

/**
 * Splits a comma-separated list of references (`sort`, `fields`). Each item is raw text up to
 * the next comma, trimmed, or a double-quoted string as in `where` (`""` is one quote), so a name
 * holding a comma can be listed: `fields=Name,"Size, net"`. With `descending`, a leading `-`
 * marks the item (`-"Size, net"`); a name that itself starts with `-` is then quoted.
 * Positions are 1-based code points, like `where`'s.
 */
export function splitReferenceList(
  text: string,
  key: QueryParameter,
  options: { descending: boolean },
): ListedReference[] {
  if (text.length > 2 * REFERENCE_LIST_MAX_LENGTH) {
    throw new QueryError(key, `must be at most ${REFERENCE_LIST_MAX_LENGTH} characters`);
  }
  const chars = Array.from(text);
  if (chars.length > REFERENCE_LIST_MAX_LENGTH) {
    throw new QueryError(key, `must be at most ${REFERENCE_LIST_MAX_LENGTH} characters`);
  }
  if (chars.every((c) => WHITESPACE.has(c))) {
    throw new QueryError(key, "must name at least one field");
  }
  const items: ListedReference[] = [];
  let index = 0;
  const skipWhitespace = () => {
    while (index < chars.length && WHITESPACE.has(chars[index]!)) index++;
  };
  for (;;) {
    skipWhitespace();
    let descending = false;
    if (options.descending && chars[index] === "-") {
      descending = true;
      index++;
      skipWhitespace();
    }
    const position = index + 1;
    let value: string;
    if (chars[index] === '"') {
      const parts: string[] = [];
      index++;
      for (;;) {
        const char = chars[index];
        if (char === undefined) throw new QueryError(key, "unterminated quoted text", position);
        index++;
        if (char === '"') {
          if (chars[index] !== '"') break;
          index++;
        }
        parts.push(char);
      }
      value = parts.join("");
      skipWhitespace();
      if (index < chars.length && chars[index] !== ",") {
        throw new QueryError(key, "expected ',' after the quoted name", index + 1);
      }
    } else {
      const start = index;
      while (index < chars.length && chars[index] !== ",") index++;
      let end = index;
      while (end > start && WHITESPACE.has(chars[end - 1]!)) end--;
      value = chars.slice(start, end).join("");
    }
    if (value === "") throw new QueryError(key, "expected a field reference", position);
    items.push({ text: value, position, descending });
    if (index >= chars.length) return items;
    index++; // the comma
  }
}
