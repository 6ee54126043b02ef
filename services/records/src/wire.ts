import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type ValidationItem, validationFailed } from "@rowbase/kit";
import {
  type Record,
  RecordCount,
  RecordSchema,
  ResponseFormat,
  RichTextFormat,
} from "@rowbase/proto/rowbase/records/v1/records_pb";
import type { CountMode } from "./db/reads.js";
import {
  type FilesOfRecord,
  type OutputOptions,
  outputData,
  type StoredRecord,
} from "./domain/record-output.js";
import type { RichText } from "./domain/rich-text.js";
import type { SchemaField } from "./table-schema.js";

/** Writes answer with every field keyed by id, as stored, whatever the read options. */
export const WRITE_OUTPUT: OutputOptions = { keys: "ids", richText: "markdown" };

export function toRecord(
  record: StoredRecord,
  fields: readonly SchemaField[],
  options: OutputOptions,
  files?: FilesOfRecord,
): Record {
  return create(RecordSchema, {
    rowId: record.rowId,
    tableId: record.tableId,
    createdAt: timestampFromDate(record.createdAt),
    updatedAt: timestampFromDate(record.updatedAt),
    dataJson: JSON.stringify(outputData(record, fields, options, files)),
    linksTruncated: truncatedKeys(record, fields, options),
  });
}

/** The record's cut link fields that are shown, keyed as its data is. */
function truncatedKeys(
  record: StoredRecord,
  fields: readonly SchemaField[],
  options: OutputOptions,
): string[] {
  const cut = record.linksTruncated;
  if (!cut) return [];
  return fields
    .filter((field) => cut.includes(field.id))
    .map((field) => (options.keys === "ids" ? field.id : field.name));
}

/**
 * The values of a write, as the request carries them (JSON text); empty is none. Only another
 * service can send anything but an object (the gateway validates the body), so anything else is
 * a 400 on `key`.
 */
export function dataOf(json: string, key: string): JsonObject | undefined {
  if (json === "") return undefined;
  let data: unknown;
  try {
    data = JSON.parse(json);
  } catch {
    data = undefined;
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    throw validationFailed([
      { key, message: "must be a JSON object", source: "body", code: "invalid_type" },
    ]);
  }
  return data as JsonObject;
}

const KEYS = new Map<ResponseFormat, OutputOptions["keys"]>([
  [ResponseFormat.UNSPECIFIED, "ids"],
  [ResponseFormat.IDS, "ids"],
  [ResponseFormat.NAMES, "names"],
]);

const RICH_TEXT = new Map<RichTextFormat, RichText>([
  [RichTextFormat.UNSPECIFIED, "markdown"],
  [RichTextFormat.MARKDOWN, "markdown"],
  [RichTextFormat.HTML, "html"],
  [RichTextFormat.PLAIN, "plain"],
]);

/** The output options a read asks for; an enum value this build does not know is a 400. */
export function outputOptionsOf(
  responseFormat: ResponseFormat,
  richText: RichTextFormat,
): OutputOptions {
  const keys = KEYS.get(responseFormat);
  const text = RICH_TEXT.get(richText);
  const items: ValidationItem[] = [];
  if (!keys)
    items.push({
      key: "response_format",
      message: "must be ids or names",
      source: "query",
      code: "invalid_value",
    });
  if (!text) {
    items.push({
      key: "rich_text",
      message: "must be markdown, html or plain",
      source: "query",
      code: "invalid_value",
    });
  }
  if (!keys || !text) throw validationFailed(items);
  return { keys, richText: text };
}

const COUNT_MODES = new Map<RecordCount, CountMode>([
  [RecordCount.UNSPECIFIED, "exact"],
  [RecordCount.EXACT, "exact"],
  [RecordCount.ESTIMATED, "estimated"],
  [RecordCount.NONE, "none"],
]);

/** How a list counts its matches; an enum value this build does not know is a 400. */
export function countModeOf(count: RecordCount): CountMode {
  const mode = COUNT_MODES.get(count);
  if (!mode) {
    throw validationFailed([
      {
        key: "count",
        message: "must be exact, estimated or none",
        source: "query",
        code: "invalid_value",
      },
    ]);
  }
  return mode;
}
