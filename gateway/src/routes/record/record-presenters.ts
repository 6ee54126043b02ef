import { recordJson } from "@rowbase/kit";
import type { Record as RecordMessage } from "@rowbase/proto/rowbase/records/v1/records_pb";
import {
  RecordCount,
  ResponseFormat,
  RichTextFormat,
} from "@rowbase/proto/rowbase/records/v1/records_pb";
import type { CountModeName, ResponseFormatName, RichTextFormatName } from "./record-schemas.js";

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
