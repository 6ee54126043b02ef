import type { JsonObject } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  computedOptionsOf,
  type FieldTypeName,
  foldName,
  linkOptionsOf,
  MAX_FIELDS_PER_TABLE,
} from "@rowbase/kit/field-types";
import type { ChangeSet } from "./change-set.js";
import { otherFieldsBytes } from "./db/constraints.js";
import { Field, type FieldRow } from "./db/entities.js";
import {
  deleteFieldRows,
  dependentsOf,
  fieldNamesOf,
  fieldOfTable,
  holdTable,
  lockTableOfDatabase,
  lockTables,
  renumberFields,
  rollupsShowing,
  type StoredField,
} from "./db/relations.js";
import {
  inverseFieldName,
  LINK_FIELD_MESSAGE,
  LINK_TABLE_MESSAGE,
  rollupFunctionProblem,
  SHOWN_FIELD_MESSAGE,
  shownFieldProblem,
} from "./domain/relational-options.js";
import { checkSchemaBytes } from "./domain/schema-size.js";
import { invalidFieldOptions } from "./domain/validation.js";
import { fieldLimitExceeded, fieldTypeChangeInvalid } from "./errors.js";
import { announceFieldDeleted, type DatabaseScope } from "./field-events.js";
import { removeFromForms } from "./forms.js";

/**
 * Catalog's side of link, lookup and rollup fields: their options checked against the database,
 * a link's inverse, and what a deletion takes along. A link's target is a table of the same
 * database, so nothing here ever looks outside one database.
 */

/** A table as these rules need it. */
export interface TableRef {
  id: bigint;
  databaseId: bigint;
  name: string;
}

function refused(prefix: string, key: string, message: string): never {
  throw invalidFieldOptions([{ key: `${prefix}options.${key}`, message }]);
}

/**
 * Checks what a link, lookup or rollup of `table` names against the database; answers a
 * link's target table, locked for update (its inverse goes there). A missing table and one of
 * another database or organization are the same invalid_field_options on `options.table_id`,
 * so that nothing tells them apart. A lookup or rollup holds the linked table in share mode to
 * the commit: the field it shows cannot be deleted before the deletion can see the new field.
 * `prefix` places the keys (`fields.2.` for a table's third initial field).
 */
export async function checkRelations(
  em: EntityManager,
  table: TableRef,
  field: { type: FieldTypeName; options: JsonObject },
  prefix = "",
): Promise<{ id: bigint; name: string } | undefined> {
  if (field.type === "link") {
    const link = linkOptionsOf(field.options);
    if (!link) return refused(prefix, "table_id", LINK_TABLE_MESSAGE);
    if (link.tableId === table.id) return { id: table.id, name: table.name };
    const target = await lockTableOfDatabase(em, table.databaseId, link.tableId);
    return target ?? refused(prefix, "table_id", LINK_TABLE_MESSAGE);
  }
  if (field.type !== "lookup" && field.type !== "rollup") return undefined;
  const computed = computedOptionsOf(field.options);
  const link = computed ? await fieldOfTable(em, table.id, computed.linkFieldId) : undefined;
  const linked = link?.type === "link" ? linkOptionsOf(link.options) : undefined;
  if (!computed || !linked) return refused(prefix, "link_field_id", LINK_FIELD_MESSAGE);
  if (linked.tableId !== table.id) await holdTable(em, linked.tableId);
  const shown = await fieldOfTable(em, linked.tableId, computed.fieldId);
  if (!shown) return refused(prefix, "field_id", SHOWN_FIELD_MESSAGE);
  const shownProblem = shownFieldProblem(shown.type);
  if (shownProblem) return refused(prefix, "field_id", shownProblem);
  const fn = computed.function;
  const fnProblem = fn === undefined ? undefined : rollupFunctionProblem(fn, shown.type);
  if (field.type === "rollup" && fnProblem) return refused(prefix, "function", fnProblem);
  return undefined;
}

/**
 * Adds the inverse of a new `link` (flushed) of table `source` to its `target` (locked): a link
 * back, named after the source table (` (2)`, ` (3)`, ... on a clash), multiple, not required,
 * last; and points the link at it. The target's field limit and schema size hold for the
 * inverse as for any field (the source's again, as the link's options grew). The caller
 * announces both once this returns: their options are then final.
 */
export async function addInverse(
  em: EntityManager,
  source: TableRef,
  link: FieldRow,
  target: { id: bigint; name: string },
  prefix = "",
): Promise<FieldRow> {
  const position = await em.count(Field, { tableId: target.id });
  if (position >= MAX_FIELDS_PER_TABLE) throw fieldLimitExceeded();
  const used = new Set(
    (await fieldNamesOf(em, target.id)).map((row) => row.name_key ?? foldName(row.name)),
  );
  const inverse = em.create(Field, {
    tableId: target.id,
    name: inverseFieldName(source.name, used),
    type: "link",
    options: { table_id: Number(source.id), multiple: true, inverse_field_id: Number(link.id) },
    required: false,
    description: "",
    position,
  });
  await em.flush();
  link.options = { ...link.options, inverse_field_id: Number(inverse.id) };
  await em.flush();
  checkSchemaBytes(await otherFieldsBytes(em, target.id), `${prefix}options.table_id`);
  if (target.id !== source.id) {
    checkSchemaBytes(await otherFieldsBytes(em, source.id), `${prefix}options`);
  }
  return inverse;
}

/**
 * Refuses changing the type of a field that a rollup of the database reads to one its function
 * does not take (a `sum` over a number made text): field_type_change_invalid. Lookups take any
 * type a field can change to. A rollup created meanwhile holds this field's table (locked by
 * the caller), so it is seen here or sees the new type.
 */
export async function checkRollupsOf(
  em: EntityManager,
  databaseId: bigint,
  fieldId: bigint,
  type: FieldTypeName,
): Promise<void> {
  for (const rollup of await rollupsShowing(em, databaseId, fieldId)) {
    const fn = computedOptionsOf(rollup.options)?.function;
    const problem = fn === undefined ? undefined : rollupFunctionProblem(fn, type);
    if (problem) {
      throw fieldTypeChangeInvalid({
        message: `the rollup field ${rollup.id} reads this field: ${problem}`,
      });
    }
  }
}

/**
 * Deletes `first` (their tables locked by the caller) with everything that goes with them, in
 * the caller's transaction: a link's inverse, and every lookup and rollup of the database that
 * goes through or shows a deleted field, and so on from those. Fields of `skipTableId` (a table
 * being deleted) are left to the table's deletion. Each deleted field leaves its table's forms
 * and order, and is announced and audited on its own; the announcements name every table
 * touched, whose cached schemas go after the commit (ChangeSet).
 *
 * Rows are deleted before their dependents are looked for, and the tables of new dependents
 * are locked before they are read again: a lookup created meanwhile (it holds the table of the
 * field it shows) is seen once its creation committed. Tables are locked in ascending id order
 * after the caller's own; two deletions meeting from opposite ends can still deadlock, which
 * PostgreSQL breaks and the caller is told to try again.
 */
export async function deleteWithDependents(
  changes: ChangeSet,
  scope: DatabaseScope,
  first: readonly bigint[],
  lockedTables: Iterable<bigint>,
  skipTableId = 0n,
): Promise<StoredField[]> {
  const { em } = changes;
  const held = new Set(lockedTables);
  const deleted: StoredField[] = [];
  let batch = [...first];
  while (batch.length > 0) {
    const rows = await deleteFieldRows(em, batch);
    deleted.push(...rows);
    const ids = rows.map((row) => row.id);
    const inverses = rows.flatMap((row) => {
      const inverse = row.type === "link" ? linkOptionsOf(row.options)?.inverseFieldId : undefined;
      return inverse === undefined ? [] : [inverse];
    });
    let found = await dependentsOf(em, scope.databaseId, ids, inverses, skipTableId);
    for (;;) {
      const unlocked = [...new Set(found.map((f) => f.tableId))].filter((id) => !held.has(id));
      if (unlocked.length === 0) break;
      for (const id of unlocked.sort((a, b) => (a < b ? -1 : 1))) held.add(id);
      await lockTables(em, unlocked);
      found = await dependentsOf(em, scope.databaseId, ids, inverses, skipTableId);
    }
    batch = found.map((field) => field.id);
  }
  const tables = [...new Set(deleted.map((field) => field.tableId))];
  for (const tableId of tables) await renumberFields(em, tableId);
  for (const field of deleted) {
    await removeFromForms(em, field.tableId, field.id);
    await announceFieldDeleted(changes, scope, field);
  }
  return deleted;
}
