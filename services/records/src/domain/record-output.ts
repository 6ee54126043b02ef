import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { SchemaField } from "../table-schema.js";
import { type RichText, renderRichText } from "./rich-text.js";

/** A record as stored. */
export interface StoredRecord {
  rowId: bigint;
  tableId: bigint;
  data: JsonObject;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * The live files of records, as the files service reports them: row id -> field id (decimal
 * string) -> the FileInfo as a file field shows it. A pair that is absent has no live file.
 */
export type RecordFiles = ReadonlyMap<bigint, ReadonlyMap<string, JsonObject>>;

/** One record's files: field id -> FileInfo value. */
export type FilesOfRecord = ReadonlyMap<string, JsonObject>;

export interface OutputOptions {
  /** `ids`: keys are field ids (`"12"`); `names`: field names. */
  keys: "ids" | "names";
  richText: RichText;
}

/**
 * The value a field shows for a record: what the record holds, its own bookkeeping, or (for a
 * file field) the live file the files service reported for the pair.
 */
export function cellOf(
  record: StoredRecord,
  field: SchemaField,
  richText: RichText,
  files?: FilesOfRecord,
): JsonValue {
  switch (field.type) {
    case "created_at":
      return record.createdAt.toISOString();
    case "updated_at":
      return record.updatedAt.toISOString();
    case "file":
      return files?.get(field.id) ?? null;
    case "long_text": {
      const value = record.data[field.id];
      return typeof value === "string" ? renderRichText(value, richText) : (value ?? null);
    }
    default:
      return record.data[field.id] ?? null;
  }
}

/**
 * A record's `data` as clients see it (SPEC section 8): one key per field shown, in that order,
 * null for an empty cell, never a missing key; values of deleted fields do not show.
 */
export function outputData(
  record: StoredRecord,
  fields: readonly SchemaField[],
  options: OutputOptions,
  files?: FilesOfRecord,
): JsonObject {
  const data: JsonObject = {};
  for (const field of fields) {
    // defineProperty: a field may be named "__proto__".
    Object.defineProperty(data, options.keys === "ids" ? field.id : field.name, {
      value: cellOf(record, field, options.richText, files),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return data;
}
