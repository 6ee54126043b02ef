import type { Record as RecordMessage } from "@rowbase/proto/rowbase/records/v1/records_pb";
import {
  RecordCount,
  ResponseFormat,
  RichTextFormat,
} from "@rowbase/proto/rowbase/records/v1/records_pb";
import { idOf, required, timeOf } from "../../presentation/wire-values.js";
import type { CountModeName, ResponseFormatName, RichTextFormatName } from "./record-schemas.js";

/**
 * A record as the REST API writes it, as JSON text. `data` arrives as JSON text of an object,
 * already keyed as the response format says and with the values as the contract writes them,
 * and goes into the answer as it is.
 */
export function recordJson(record: RecordMessage | undefined): string {
  const r = required(record, "record");
  return `{"row_id":${idOf(r.rowId)},"table_id":${idOf(r.tableId)},"created_at":${JSON.stringify(timeOf(r.createdAt))},"updated_at":${JSON.stringify(timeOf(r.updatedAt))},"data":${r.dataJson === "" ? "{}" : r.dataJson}}`;
}

/** Records as a JSON array (`recordJson` each). */
export function recordsJson(records: readonly RecordMessage[]): string {
  return `[${records.map((record) => recordJson(record)).join(",")}]`;
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

const COUNT_VALUES: Record<CountModeName, RecordCount> = {
  exact: RecordCount.EXACT,
  estimated: RecordCount.ESTIMATED,
  none: RecordCount.NONE,
};

export function countValue(name: CountModeName): RecordCount {
  return COUNT_VALUES[name];
}

export function responseFormatValue(name: ResponseFormatName): ResponseFormat {
  return RESPONSE_FORMAT_VALUES[name];
}

/** Absent: UNSPECIFIED, which the contract reads as markdown. */
export function richTextValue(name: RichTextFormatName | undefined): RichTextFormat {
  return name === undefined ? RichTextFormat.UNSPECIFIED : RICH_TEXT_VALUES[name];
}
