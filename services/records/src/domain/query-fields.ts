import { choicesOf, isSelectType } from "@rowbase/kit/field-types";
import type { QueryField } from "../query/index.js";
import type { SchemaField } from "../table-schema.js";

/**
 * The query fields made from each table schema's field list. A schema is cached and never
 * changed in place, and every record of a batch is checked against the same one.
 */
const madeFrom = new WeakMap<readonly SchemaField[], readonly QueryField[]>();

/** The table's fields as the query language knows them, select choices included. */
export function queryFieldsOf(fields: readonly SchemaField[]): readonly QueryField[] {
  const known = madeFrom.get(fields);
  if (known) return known;
  const queryFields = fields.map((field) => {
    const queryField: QueryField = { id: field.id, name: field.name, type: field.type };
    if (isSelectType(field.type)) {
      const choices = choicesOf(field.options);
      return {
        ...queryField,
        choices: choices.map((choice) => choice.name),
        choiceIds: choices.map((choice) => choice.id),
      };
    }
    return queryField;
  });
  madeFrom.set(fields, Object.freeze(queryFields));
  return queryFields;
}
