const WHITESPACE = new Set([" ", "\t", "\n", "\r"]);

/**
 * Splits a `sort` or `fields` parameter (SPEC 8.3) into its items as written, for the repeated
 * strings `sort` and `fields` of the records requests. An item is the raw text up to the next
 * comma, or a double-quoted name kept whole with its quotes (`"Size, net"`, `""` for a quote
 * inside), after an optional `-` where `descending` is allowed: the records service's own
 * reading. Nothing is trimmed or dropped, so `items.join(",")` is the parameter exactly and the
 * service reports problems at the positions the client sees; it also judges every item
 * (unknown fields, empty items, an unterminated quote). Empty text has no items: the default.
 */
export function splitReferenceItems(text: string, options: { descending: boolean }): string[] {
  if (text === "") return [];
  const items: string[] = [];
  let start = 0;
  for (;;) {
    let index = start;
    const skipWhitespace = () => {
      while (index < text.length && WHITESPACE.has(text.charAt(index))) index++;
    };
    skipWhitespace();
    if (options.descending && text.charAt(index) === "-") {
      index++;
      skipWhitespace();
    }
    if (text.charAt(index) === '"') {
      index++;
      for (;;) {
        if (index >= text.length) {
          items.push(text.slice(start));
          return items;
        }
        const char = text.charAt(index);
        index++;
        if (char !== '"') continue;
        if (text.charAt(index) !== '"') break;
        index++;
      }
    }
    const comma = text.indexOf(",", index);
    if (comma === -1) {
      items.push(text.slice(start));
      return items;
    }
    items.push(text.slice(start, comma));
    start = comma + 1;
  }
}
