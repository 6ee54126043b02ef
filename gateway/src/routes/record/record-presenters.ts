import type { JsonObject } from "@bufbuild/protobuf";
import type { Record as RecordMessage } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { ResponseFormat, RichTextFormat } from "@rowbase/proto/rowbase/records/v1/records_pb";
import type { z } from "zod";
import { idOf, required, timeOf } from "../../presentation/wire-values.js";
import type { RecordSchema, ResponseFormatName, RichTextFormatName } from "./record-schemas.js";

/**
 * A record as SPEC section 8 writes it. `data` arrives as JSON text of an object, already keyed
 * as the response format says and with the values as the contract writes them.
 */
export function presentRecord(record: RecordMessage | undefined): z.output<typeof RecordSchema> {
  const r = required(record, "record");
  return {
    row_id: idOf(r.rowId),
    table_id: idOf(r.tableId),
    created_at: timeOf(r.createdAt),
    updated_at: timeOf(r.updatedAt),
    data: r.dataJson === "" ? {} : (JSON.parse(r.dataJson) as JsonObject),
  };
}

const RESPONSE_FORMAT_VALUES: Record<ResponseFormatName, ResponseFormat> = {
  ids: ResponseFormat.IDS,
  names: ResponseFormat.NAMES,
};

const RICH_TEXT_VALUES: Record<RichTextFormatName, RichTextFormat> = {
  markdown: RichTextFormat.MARKDOWN,
  html: RichTextFormat.HTML,
  plain: RichTextFormat.PLAIN,
};

export function responseFormatValue(name: ResponseFormatName): ResponseFormat {
  return RESPONSE_FORMAT_VALUES[name];
}

/** Absent: UNSPECIFIED, which the contract reads as markdown. */
export function richTextValue(name: RichTextFormatName | undefined): RichTextFormat {
  return name === undefined ? RichTextFormat.UNSPECIFIED : RICH_TEXT_VALUES[name];
}
