/**
 * JSON text for fuzzed bodies. JSON.stringify cannot write some of what a client can send (a
 * number such as 1e309 or -0, a duplicated key, a `__proto__` key made by a literal), so a body
 * is a tree of plain values plus `RawJson` pieces written verbatim.
 */
export class RawJson {
  constructor(readonly text: string) {}
}

export function toJsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(toJsonText).join(",")}]`;
  if (value !== null && typeof value === "object") {
    // Own keys, `__proto__` included when made with Object.defineProperty or JSON.parse.
    const entries = Object.keys(value).map(
      (key) => `${JSON.stringify(key)}:${toJsonText((value as Record<string, unknown>)[key])}`,
    );
    return `{${entries.join(",")}}`;
  }
  if (value === undefined) return "null";
  return JSON.stringify(value) ?? "null";
}

/** An object with this own key, even `__proto__` (which an assignment would not create). */
export function withKey(
  object: Record<string, unknown>,
  key: string,
  value: unknown,
): Record<string, unknown> {
  const copy = { ...object };
  Object.defineProperty(copy, key, { value, enumerable: true, writable: true, configurable: true });
  return copy;
}
