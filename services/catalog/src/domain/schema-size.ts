import type { JsonObject } from "@bufbuild/protobuf";
import { invalidFieldOptions } from "./validation.js";

/**
 * The most a table's fields may hold together in names, descriptions and options (1 MiB, as
 * `schemaBytesOf` counts them). Every record and file call reads the table's schema: records
 * fetches it from the shared cache on each call and keeps a thousand parsed in memory, and
 * catalog sends it whole in GetTableSchema and GetTable. The other limits allow far more: 500
 * fields of up to 1000 choices of 100 characters (up to 3 bytes each in UTF-8), a 1000-character
 * description and a 100-character name come to about 185 MB of protobuf. A table of 500 fields
 * with a full description each in a Latin script, and a few selects of a thousand short
 * choices, stays under 1 MiB. Protobuf's framing adds at most about a sixth (choices of one
 * character) and JSON's some 200 bytes per field.
 */
export const MAX_SCHEMA_BYTES = 1024 * 1024;

/** A field as its table's schema holds it. */
export interface SizedField {
  name: string;
  description: string;
  options: JsonObject;
}

/** What a field adds to its table's schema: its name, description and options (as JSON), in UTF-8. */
export function schemaBytesOf(field: SizedField): number {
  return (
    Buffer.byteLength(field.name) +
    Buffer.byteLength(field.description) +
    Buffer.byteLength(JSON.stringify(field.options))
  );
}

/**
 * Refuses a change after which its table's fields would hold `bytes`, when that is more than
 * MAX_SCHEMA_BYTES: 400 invalid_field_options keyed `key`.
 */
export function checkSchemaBytes(bytes: number, key: string): void {
  if (bytes <= MAX_SCHEMA_BYTES) return;
  throw invalidFieldOptions([
    {
      key,
      message:
        `would make the table's fields hold ${bytes} bytes of names, descriptions and options ` +
        `(UTF-8, options as JSON); a table holds at most ${MAX_SCHEMA_BYTES}`,
    },
  ]);
}
