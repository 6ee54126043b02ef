import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type CallContext,
  query,
  sameJson,
  TABLE_SCHEMA_CACHE_TTL_SECONDS,
  type ValidationItem,
  validationFailed,
} from "@rowbase/kit";
import {
  canChangeType,
  type FieldLike,
  fieldLikeOf,
  fieldTypeFromProto,
  isRelationalType,
} from "@rowbase/kit/field-types";
import type { Field, FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { ChangeSet, type RecordScope, type Transactions } from "./change-set.js";
import { epochMs } from "./db/rows.js";
import {
  dropTypeChangeMarks,
  liftRequiredMarks,
  markTypeChangePending,
  notProcessed,
} from "./db/schema-changes.js";
import { linkChangeRefusal } from "./db/user-tables/link-writes.js";
import type { StoredTables } from "./db/user-tables/registry.js";
import { changeUserTableField, undoFieldChange } from "./db/user-tables/schema-changes.js";
import {
  conversionProblem,
  convertedValue,
  type RequiredRule,
  type StoredCell,
} from "./domain/type-change.js";
import { fieldTypeChangeInvalid } from "./errors.js";

/** Records read and converted per statement (and, when applying, per transaction). */
const CHUNK = 500;
/** How many offending rows a refusal names. */
const EXAMPLES = 5;
/**
 * How long a checked type change stays pending when its conversion does not come (catalog did
 * not commit it): writes checked against the old type land only until catalog's commit deletes
 * the cached schema, or, when that deletion failed, until the entry expires.
 */
export const PENDING_SECONDS = 2 * TABLE_SCHEMA_CACHE_TTL_SECONDS;

interface CellRow {
  row_id: string;
  value: JsonValue | null;
  has_value: boolean;
  created_ms: number;
  updated_ms: number;
}

/** Whether a field's values come from the record's columns rather than from `data`. */
function fromColumns(field: FieldLike): boolean {
  return field.type === "created_at" || field.type === "updated_at";
}

const CELL_COLUMNS = (field: string) =>
  `row_id, data -> ${field} as value, data ? ${field} as has_value,
   ${epochMs("created_at")} as created_ms, ${epochMs("updated_at")} as updated_ms`;

/**
 * The next chunk of a field's cells after `afterRowId`: only records holding a value, unless the
 * value comes from the record's own columns or `every` record is asked for.
 */
async function cellsAfter(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  from: FieldLike,
  afterRowId: string,
  lock: boolean,
  every = false,
): Promise<CellRow[]> {
  const all = every || fromColumns(from);
  return query<CellRow>(
    em,
    `select ${CELL_COLUMNS("$2::text")} from record
     where table_id = $1 and row_id > $3 ${all ? "" : "and data ? $2::text"}
     order by row_id limit ${CHUNK} ${lock ? "for update" : ""}`,
    [tableId, fieldId, afterRowId],
  );
}

function cellOf(row: CellRow): StoredCell {
  return {
    value: row.value ?? null,
    createdAt: new Date(row.created_ms),
    updatedAt: new Date(row.updated_ms),
  };
}

/**
 * Field type changes against the stored values: the check catalog asks for before it changes a
 * type (CheckFieldTypeChange), and the conversion that follows the FieldTypeChanged event. Both
 * use the field-type registry's `convertValue`, the one place for conversion rules.
 */
export class TypeChanges {
  constructor(
    private readonly tx: Transactions,
    private readonly tables: StoredTables,
  ) {}

  /**
   * Refuses with field_type_change_invalid when a stored value of the field does not convert to
   * the new type and options, or, when the field is to be `required`, a record's value would be
   * empty after the change (a required field cannot be cleared), naming a few of the rows.
   * A change of type or options it agrees to is pending until its values are converted (or
   * `PENDING_SECONDS`): writes of the field must convert to it too (`pending_type_change`,
   * migrations/write-gate.ts). A field it agrees to make required is required of every write
   * for `PENDING_SECONDS`, or until the field is made optional again
   * (migrations/required-marks.ts). The marks carry `changeId`, catalog's id of this attempt at
   * the change (migrations/change-ids.ts). Returns the ids of the marks it left; `release`
   * takes them, or the change id, when catalog does not commit the change. A user table's
   * conversion stops and rolls back once `signal` aborts (catalog gave up waiting).
   */
  async check(
    field: Field,
    newType: FieldType,
    newOptions: JsonObject | undefined,
    required = false,
    changeId = "",
    signal?: AbortSignal,
  ): Promise<string[]> {
    const from = fieldLikeOf(field);
    const toType = fieldTypeFromProto(newType);
    const items: ValidationItem[] = [];
    if (!from)
      items.push({
        key: "field.type",
        message: "is not a known type",
        source: "body",
        code: "invalid_value",
      });
    if (!toType)
      items.push({
        key: "new_type",
        message: "is not a known type",
        source: "body",
        code: "invalid_value",
      });
    if (!from || !toType) throw validationFailed(items);
    const to: FieldLike = { type: toType, options: newOptions ?? {} };
    if (!canChangeType(from.type, to.type)) {
      throw fieldTypeChangeInvalid({ message: `cannot convert ${from.type} to ${to.type}` });
    }
    // A select's new choices are pending too (a write of a removed one would store a value no
    // choice shows); catalog's ChoicesRenamed, not FieldTypeChanged, ends that. A field being
    // made required gets a mark of its own, which no event ends (migrations/required-marks.ts);
    // made optional again, its marks are lifted, until the change is released.
    const converts = from.type !== to.type || !sameJson(from.options ?? {}, to.options ?? {});
    const rule: RequiredRule = !required ? "none" : field.required ? "kept" : "made";
    const userTable = await this.tables.userTableOf(field.tableId);
    if (userTable) {
      // A table in its own user table is converted here, before catalog commits the change:
      // the client's next request sees it, and a refusal leaves both unchanged. No mark holds
      // writes: the conversion holds the table's writes itself, and a write of the old type
      // that lands in between is refused by its column and retried with the new schema.
      // A link has no column: its change converts nothing, the check reads its junction.
      if (from.type === "link" && to.type === "link") {
        const refused = await linkChangeRefusal(
          this.tx.em(),
          userTable,
          field.fieldId,
          from,
          to,
          rule === "made",
          EXAMPLES,
        );
        if (refused) {
          throw fieldTypeChangeInvalid({
            row_ids: JSON.stringify(refused.rowIds.map(Number)),
            count: String(refused.count),
            message: refused.message,
          });
        }
        return [];
      }
      // Lookups and rollups are computed when read: nothing stored to convert.
      if (isRelationalType(from.type) || isRelationalType(to.type)) return [];
      if (!converts && rule !== "made") return [];
      const { refused } = await changeUserTableField(
        this.tx.em(),
        userTable,
        {
          from: { id: field.fieldId, ...from },
          to: { id: field.fieldId, ...to },
          required: rule,
        },
        changeId || undefined,
        signal ? { signal } : {},
      );
      if (refused) {
        throw fieldTypeChangeInvalid({
          row_ids: JSON.stringify(refused.rowIds.map(Number)),
          count: String(refused.count),
          message: refused.message,
        });
      }
      return [];
    }
    // Without `record`, a table not registered stores no value to check (it does not exist).
    if (await this.tables.recordGone()) return [];
    const target = {
      tableId: field.tableId,
      fieldId: field.fieldId,
      toType: to.type,
      toOptions: to.options,
    };
    const marks = await this.tx.run({ principal: undefined, requestId: "" }, async ({ em }) => {
      if (!required && field.required) {
        await liftRequiredMarks(em, field.tableId, field.fieldId, changeId);
      }
      const made: string[] = [];
      if (converts) {
        made.push(await markTypeChangePending(em, target, PENDING_SECONDS, "converts", changeId));
      }
      if (rule === "made") {
        made.push(await markTypeChangePending(em, target, PENDING_SECONDS, "required", changeId));
      }
      return made;
    });
    // Made optional alone: no value to look at.
    if (!converts && rule === "none") return marks;
    try {
      await this.checkValues(field, from, to, rule);
    } catch (error) {
      // Catalog changes nothing after a refusal (or a failure): writes need not follow it.
      await this.release(field.tableId, marks, changeId);
      throw error;
    }
    return marks;
  }

  /**
   * Removes the marks `ids`, and those of `changeId`, of the table's change that will not be
   * applied: writes are no longer held to it, and are held again to the required marks it
   * lifted. Only those: the marks of another change of the field, later or not, stay.
   */
  async release(tableId: bigint, ids: readonly string[], changeId = ""): Promise<void> {
    if (changeId && (await this.tables.inUserTable(tableId))) {
      // The conversion made for the check is taken back.
      return undoFieldChange(this.tx.em(), tableId, changeId);
    }
    if (ids.length === 0 && !changeId) return;
    await this.tx.run({ principal: undefined, requestId: "" }, ({ em }) =>
      dropTypeChangeMarks(em, tableId, ids, changeId),
    );
  }

  /** `check`'s reading of the stored values: every record's when the field is made required. */
  private async checkValues(
    field: Field,
    from: FieldLike,
    to: FieldLike,
    required: RequiredRule,
  ): Promise<void> {
    const em = this.tx.em();
    const offending: string[] = [];
    let count = 0;
    let message = "";
    for (let after = "0"; ; ) {
      const rows = await cellsAfter(
        em,
        field.tableId,
        field.fieldId.toString(),
        from,
        after,
        false,
        required === "made",
      );
      for (const row of rows) {
        const problem = conversionProblem(from, to, cellOf(row), required);
        if (problem === undefined) continue;
        count += 1;
        if (offending.length < EXAMPLES) offending.push(row.row_id);
        if (!message) message = `record ${row.row_id}: ${problem}`;
      }
      if (rows.length < CHUNK) break;
      after = rows.at(-1)!.row_id;
    }
    if (count > 0) {
      throw fieldTypeChangeInvalid({
        row_ids: JSON.stringify(offending.map(Number)),
        count: String(count),
        message,
      });
    }
  }

  /**
   * Converts the stored values of a field whose type changed, a chunk of records per transaction
   * (a large table is never locked whole), up to the last chunk, which is left to `applyLast`
   * (in the consumer's transaction, which records the event id with it). A value that does not
   * convert becomes null, with an audit entry that keeps it (`clearedValues`). Applying it again
   * changes nothing: values already of the new type stay. Does nothing for an event the consumer has applied. Returns where the last chunk starts
   * and how many values were converted.
   */
  async applyAllButLast(
    consumer: string,
    eventId: string,
    change: TypeChange,
  ): Promise<{ after: string; converted: number }> {
    let converted = 0;
    for (let after = "0"; ; ) {
      const step = await this.tx.run(contextOf(change), async (changes) => {
        const { em } = changes;
        if (after === "0" && !(await notProcessed(em, consumer, eventId))) return undefined;
        const rows = await cellsAfter(
          em,
          change.scope.tableId,
          change.fieldId.toString(),
          change.from,
          after,
          true,
        );
        // The last chunk: left (unconverted) to the transaction that records the event.
        if (rows.length < CHUNK) return undefined;
        return { next: rows.at(-1)!.row_id, converted: await convertRows(changes, change, rows) };
      });
      if (!step) return { after, converted };
      converted += step.converted;
      after = step.next;
    }
  }

  /**
   * Converts the values after `after` in the caller's transaction `em` (the last chunk, or more
   * when records were created meanwhile); returns how many.
   */
  async applyLast(em: EntityManager, change: TypeChange, after: string): Promise<number> {
    // Its audit entries go to the outbox with the event's id; the relay's next round sends them.
    const changes = new ChangeSet(em, contextOf(change));
    let converted = 0;
    for (;;) {
      const rows = await cellsAfter(
        em,
        change.scope.tableId,
        change.fieldId.toString(),
        change.from,
        after,
        true,
      );
      converted += await convertRows(changes, change, rows);
      if (rows.length < CHUNK) {
        await changes.flush();
        return converted;
      }
      after = rows.at(-1)!.row_id;
    }
  }

  /**
   * Converts the values of the records `rowIds` in the caller's transaction `em`, which holds the
   * table's exclusive lock: those that writes noted while the change was pending
   * (migrations/pending-writes.ts), written after the conversion passed them. Returns how many
   * it converted.
   */
  async applyNoted(
    em: EntityManager,
    change: TypeChange,
    rowIds: readonly string[],
  ): Promise<number> {
    if (rowIds.length === 0) return 0;
    const changes = new ChangeSet(em, contextOf(change));
    let converted = 0;
    for (let start = 0; start < rowIds.length; start += CHUNK) {
      const rows = await query<CellRow>(
        em,
        `select ${CELL_COLUMNS("$2::text")} from record
         where table_id = $1 and row_id = any($3::bigint[])
         order by row_id for update`,
        [change.scope.tableId, change.fieldId.toString(), rowIds.slice(start, start + CHUNK)],
      );
      converted += await convertRows(changes, change, rows);
    }
    await changes.flush();
    return converted;
  }
}

/** A field's type change, as the FieldTypeChanged event tells it. */
export interface TypeChange {
  scope: RecordScope;
  fieldId: bigint;
  /** The field's name after the change, for audit entries. */
  fieldName: string;
  from: FieldLike;
  to: FieldLike;
  /** The request that changed the type, for the events the conversion writes. */
  requestId: string;
  /** Catalog's id of the change, which its check's marks carry; empty from older catalogs. */
  changeId: string;
}

/** The conversion acts on its own: its audit entries name the system. */
function contextOf(change: TypeChange): CallContext {
  return { principal: undefined, requestId: change.requestId };
}

/**
 * Converts the values of `rows` that are not already what the new type makes of them. A value
 * that does not convert can only have been written after catalog's check by a write whose
 * schema was still the old one once the change was no longer pending (`PENDING_SECONDS`); it is
 * cleared, and an audit entry `record.updated` by the
 * system keeps it, so the 90-day audit log shows what was lost and when.
 */
async function convertRows(
  changes: ChangeSet,
  change: TypeChange,
  rows: CellRow[],
): Promise<number> {
  const ids: string[] = [];
  const values: (string | null)[] = [];
  for (const row of rows) {
    const value = convertedValue(change.from, change.to, cellOf(row));
    const before = row.has_value ? JSON.stringify(row.value) : null;
    const now = value === null ? null : JSON.stringify(value);
    if (before === now) continue;
    ids.push(row.row_id);
    values.push(now);
    if (now === null && row.value !== null) {
      const key = change.fieldId.toString();
      changes.auditRecord(change.scope, "updated", BigInt(row.row_id), [
        { key, label: change.fieldName || key, old: row.value },
      ]);
    }
  }
  if (ids.length > 0) {
    await query(
      changes.em,
      `update record r set data = case when item.value is null then r.data - $1::text
         else jsonb_set(r.data, array[$1::text], item.value) end
       from unnest($2::bigint[], $3::jsonb[]) as item(row_id, value)
       where r.row_id = item.row_id`,
      [change.fieldId.toString(), ids, values],
    );
  }
  return ids.length;
}
