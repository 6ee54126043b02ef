import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@rowbase/kit";
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
  /** long_text values already in the `richText` format, by stored text (`renderTexts`). */
  rendered?: ReadonlyMap<string, string> | undefined;
}

/** How long rendering runs before the event loop gets a turn. */
const RENDER_SLICE_MS = 10;

/**
 * The long_text values of `records` in the `richText` format (html, plain), by stored text,
 * each distinct one rendered once. Crafted Markdown of 100,000 characters takes up to half a
 * second to render and a page holds up to 1000 records: rendered in one go, such a page would
 * stall every other call of the service for minutes. So after each RENDER_SLICE_MS of
 * rendering the event loop gets a turn, and a call given up meanwhile (its deadline passed,
 * its client went away) stops there. Undefined for markdown, which is answered as stored.
 */
export async function renderTexts(
  records: readonly StoredRecord[],
  fields: readonly SchemaField[],
  richText: RichText,
  signal: AbortSignal,
): Promise<ReadonlyMap<string, string> | undefined> {
  const texts = fields.filter((field) => field.type === "long_text");
  if (richText === "markdown" || texts.length === 0) return undefined;
  const rendered = new Map<string, string>();
  let sliceStart = performance.now();
  for (const record of records) {
    for (const field of texts) {
      const source = record.data[field.id];
      if (typeof source !== "string" || rendered.has(source)) continue;
      rendered.set(source, renderRichText(source, richText));
      if (performance.now() - sliceStart < RENDER_SLICE_MS) continue;
      await new Promise((resolve) => setImmediate(resolve));
      if (signal.aborted) throw new ConnectError("the call was given up", Code.Canceled);
      sliceStart = performance.now();
    }
  }
  return rendered;
}

/**
 * The value a field shows for a record: what the record holds, its own bookkeeping, or (for a
 * file field) the live file the files service reported for the pair.
 */
function cellOf(
  record: StoredRecord,
  field: SchemaField,
  options: OutputOptions,
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
      if (typeof value !== "string") return value ?? null;
      return options.rendered?.get(value) ?? renderRichText(value, options.richText);
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
      value: cellOf(record, field, options, files),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return data;
}
