/**
 * Whether a value is a plain object, as JSON.parse, jsonb and a protobuf Struct give them:
 * not null, not an array, not a class instance (a Date, a Buffer) whose fields JSON would not
 * carry as they are.
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}
