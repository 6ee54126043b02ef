import { choicesOf, isSelectType } from "@rowbase/kit/field-types";
import type { QueryField } from "../query/index.js";
import type { SchemaField } from "../table-schema.js";

/** The table's fields as the query language knows them, select choices included. */
export function queryFieldsOf(fields: readonly SchemaField[]): QueryField[] {
  return fields.map((field) => {
    const queryField: QueryField = { id: field.id, name: field.name, type: field.type };
    if (isSelectType(field.type)) {
      return { ...queryField, choices: choicesOf(field.options).map((choice) => choice.name) };
    }
    return queryField;
  });
}
