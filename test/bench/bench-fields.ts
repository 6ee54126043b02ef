import type { JsonValue } from "@bufbuild/protobuf";
import type { SchemaField } from "@rowbase/records/statements";
import { FIELDS } from "./seed.js";

// The benchmark's table as the records service sees it, for the scripts that measure the
// storage straight in PostgreSQL (typed-storage.ts, move-table.ts).

export const CHOICE_IDS: Record<string, string> = {
  Open: "ch_open",
  Won: "ch_won",
  Lost: "ch_lost",
  red: "ch_red",
  green: "ch_green",
  blue: "ch_blue",
  urgent: "ch_urgent",
};

/** The benchmark's 8 fields with ids 11-18, choices with ids, as the records service sees them. */
export const SCHEMA_FIELDS: SchemaField[] = FIELDS.map((field, index) => {
  const options: Record<string, JsonValue> = {};
  if ("options" in field) {
    const given: { decimals?: number; choices?: readonly { name: string }[] } = field.options;
    if (given.decimals !== undefined) options.decimals = given.decimals;
    if (given.choices) {
      options.choices = given.choices.map((c) => ({ id: CHOICE_IDS[c.name]!, name: c.name }));
    }
  }
  return {
    id: String(11 + index),
    name: field.name,
    type: field.type as SchemaField["type"],
    options,
    required: false,
    description: "",
  };
});
