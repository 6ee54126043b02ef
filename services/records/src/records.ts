import { setTimeout as sleep } from "node:timers/promises";
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type Call,
  errorInfoOf,
  hasSqlState,
  RECORD_BATCH_MAX,
  RECORD_LIMIT_DEFAULT,
  RECORD_LIMIT_MAX,
  type ReadStatement,
  SUBJECTS,
  type ValidationItem,
  validationFailed,
} from "@rowbase/kit";
import { computedOptionsOf, type FieldLike } from "@rowbase/kit/field-types";
import { RecordsDeletedSchema } from "@rowbase/proto/rowbase/events/v1/records_events_pb";
import type { Access } from "./access.js";
import { actorName, type ChangeSet, type Transactions } from "./change-set.js";
import { takeAutonumbers } from "./db/autonumbers.js";
import {
  createRecords,
  type GateOutcome,
  lockForCreate,
  passCreateGate,
  releaseRecords,
} from "./db/create-gate.js";
import {
  type CountMode,
  findRecord,
  findRecords,
  lockRecordsForWrite,
  type PageQuery,
  pageWithTotal,
  readRecordVersion,
} from "./db/reads.js";
import { RECORD_ROWS, RecordsTooLarge, type TableRows } from "./db/rows.js";
import {
  type CheckedMark,
  notePendingWrites,
  type PendingTypeChange,
  pendingTypeChanges,
} from "./db/schema-changes.js";
import { withRelations } from "./db/user-tables/computed-values.js";
import { indexKeysOf, keyText, orderedBy, type TableIndexes } from "./db/user-tables/indexes.js";
import { type LinkedSchemas, linkStoragesOf } from "./db/user-tables/link-values.js";
import { type LinkWrite, writeLinks } from "./db/user-tables/link-writes.js";
import type { StoredTables } from "./db/user-tables/registry.js";
import { userTableRows } from "./db/user-tables/table-rows.js";
import {
  deleteRecordIfUnchanged,
  deleteRecords,
  insertRecords,
  type RowIdBlock,
  writeRecordIfUnchanged,
  writeRecords,
} from "./db/writes.js";
import { valueChanges } from "./domain/audit.js";
import { emptyLinksCleared, hasLinks, valueKey, withLinkIds } from "./domain/link-changes.js";
import { queryFieldsOf } from "./domain/query-fields.js";
import { createdChange, deletedChange, updatedChange } from "./domain/record-changes.js";
import { applyValues, type CheckedValues, checkInput } from "./domain/record-input.js";
import type { RecordFiles, StoredRecord } from "./domain/record-output.js";
import { type RecordSchema, recordSchemaOf } from "./domain/record-schema.js";
import { heldAsChanged, pendingProblem } from "./domain/type-change.js";
import {
  batchTooLarge,
  pageTooLarge,
  recordLimitExceeded,
  recordNotFound,
  recordsTooLarge,
  tableNotFound,
} from "./errors.js";
import type { FileValues } from "./file-values.js";
import type { Plans } from "./plans.js";
import {
  buildWhere,
  type CompiledWhere,
  orderTerms,
  parseFields,
  parseSort,
  QueryError,
  type QueryField,
  type SortKey,
  type Storage,
} from "./query/index.js";
import type { SchemaField, TableSchema } from "./table-schema.js";

/** Which table a call addresses: `databaseId` 0 when the route names none. */
export interface TableRef {
  tableId: bigint;
  databaseId: bigint;
}

/** Records with the table they belong to and their live files, for presenting them. */
export interface RecordsView {
  schema: TableSchema;
  records: StoredRecord[];
  /** The files of the records' file fields, by row and field. */
  files: RecordFiles;
}

export interface RecordView {
  schema: TableSchema;
  record: StoredRecord;
  /** The fields to show, in order. */
  fields: SchemaField[];
  files: RecordFiles;
}

export interface ListParams {
  limit: number;
  offset: number;
  count: CountMode;
  where: string;
  /** The `sort` parameter as written; empty: row_id ascending. */
  sort: string;
  /** The `fields` parameter as written; empty: every field. */
  fields: string;
}

export interface ListView extends RecordsView {
  /** The fields to show, in order. */
  fields: SchemaField[];
  /** Null when the list asked for no count. */
  total: bigint | null;
  totalEstimated: boolean;
  hasMore: boolean;
  limit: number;
  offset: number;
}

/** A request's query-language parameter as a 400 with its position. */
function queryProblem(error: unknown): never {
  if (error instanceof QueryError) throw validationFailed([error.toValidationIssue()]);
  throw error;
}

/**
 * The fields a `fields` parameter selects, every field when it is empty. The text is the
 * client's as sent, so errors name the positions the client sees.
 */
export function selectedFields(schema: TableSchema, text: string): SchemaField[] {
  if (text === "") return schema.fields;
  try {
    const selected = parseFields(text, queryFieldsOf(schema.fields));
    return selected.map((field) => schema.fields.find((f) => f.id === field.id)!);
  } catch (error) {
    return queryProblem(error);
  }
}

/** The sort keys of a `sort` parameter, given as `fields` is; empty: row_id ascending. */
function sortKeys(queryFields: readonly QueryField[], text: string): SortKey[] {
  if (text === "") return [];
  try {
    return parseSort(text, queryFields);
  } catch (error) {
    return queryProblem(error);
  }
}

/**
 * What a list of the table reads: the `where` filter, the `sort` order and the
 * page, compiled to SQL; a bad parameter is a 400 listing every problem of limit and offset, or
 * the first of `where` and `sort`. An absent `where` matches every record; a blank one is a 400
 * (it never fails open). `storage` says where the records are read from: the one jsonb record
 * table, or the table's own PostgreSQL table with a column per field (docs/records-storage.md),
 * whose `indexed` field indexes (`TableIndexes.served`) the page may take its order from, unless
 * it counts every match of a filter exactly and no index serves the filter (it then reads the
 * matches all, once, to count and sort them). `linked`: the fields of the tables its links name
 * (`Access.linked`), for its link values, lookups and rollups. `read`: the fields whose values
 * the page reads (a list's `fields`; `where` and `sort` reach every field of the schema), so that
 * a page without its links' fields does not compute them.
 */
export function listQuery(
  schema: TableSchema,
  params: Pick<ListParams, "limit" | "offset" | "where" | "sort"> &
    Partial<Pick<ListParams, "count">>,
  storage: Storage = "jsonb",
  indexed: ReadonlySet<string> = new Set(),
  linked: LinkedSchemas = new Map(),
  read: readonly SchemaField[] = schema.fields,
): PageQuery {
  const problems: ValidationItem[] = [];
  const limit = params.limit === 0 ? RECORD_LIMIT_DEFAULT : params.limit;
  if (limit < 1 || limit > RECORD_LIMIT_MAX) {
    problems.push({
      key: "limit",
      message: `must be 1-${RECORD_LIMIT_MAX}`,
      source: "query",
      code: "out_of_range",
    });
  }
  if (params.offset < 0) {
    problems.push({
      key: "offset",
      message: "must be 0 or more",
      source: "query",
      code: "out_of_range",
    });
  }
  if (problems.length > 0) throw validationFailed(problems);

  const jsonb = storage === "jsonb";
  // On the per-table storage, links, lookups and rollups are reached through their junctions.
  const queryFields = jsonb
    ? queryFieldsOf(schema.fields)
    : withRelations(schema.organizationId, schema.fields, queryFieldsOf(schema.fields), linked);
  const count = params.count ?? "exact";
  const keys = sortKeys(queryFields, params.sort);
  let filter: CompiledWhere = {
    sql: "true",
    params: [],
    readsData: false,
    fieldIds: [],
    conjuncts: { equalities: [], ranges: [], exact: [] },
  };
  if (params.where !== "") {
    try {
      filter = buildWhere(params.where, queryFields, {
        paramOffset: jsonb ? 1 : 0,
        now: new Date(),
        tableAlias: "r",
        storage,
      });
    } catch (error) {
      queryProblem(error);
    }
  }
  const sorted = keys.flatMap((key) => (key.target.kind === "field" ? [key.target.field.id] : []));
  const candidates = jsonb ? undefined : indexKeysOf(schema, filter, sorted);
  const filterServed =
    candidates !== undefined &&
    candidates.filter.length > 0 &&
    candidates.filter.every((key) => indexed.has(keyText(key)));
  const indexOrdered = !jsonb && (params.where === "" || count !== "exact" || filterServed);
  const order = orderTerms(keys, {
    tableAlias: "r",
    storage,
    ...(indexOrdered ? { indexed: orderedBy(indexed, candidates?.sort ?? []) } : {}),
  });
  const page = {
    filtered: params.where !== "",
    // The per-table storage's filters read columns only.
    filterReadsData: filter.readsData && !indexOrdered,
    order,
    limit,
    offset: params.offset,
    count,
  };
  if (jsonb) {
    return {
      ...page,
      indexCandidates: [],
      rows: RECORD_ROWS,
      matching: `from record r where r.table_id = $1 and ${filter.sql}`,
      params: [schema.tableId, ...filter.params],
    };
  }
  const rows = userTableRows(
    schema.organizationId,
    schema.tableId,
    withLinksOf(read, schema),
    linked,
  );
  return {
    ...page,
    indexCandidates: candidates ? [...candidates.filter, ...candidates.sort] : [],
    rows,
    matching: `from ${rows.relation} r where ${filter.sql}`,
    params: filter.params,
  };
}

/**
 * `read` with the link fields its lookups and rollups follow: a lookup is computed through its
 * link, which the statement must know even when the page does not show it.
 */
function withLinksOf(read: readonly SchemaField[], schema: TableSchema): readonly SchemaField[] {
  if (read === schema.fields) return read;
  const needed = new Set(
    read.flatMap((field) => {
      const options = computedOptionsOf(field.options);
      return (field.type === "lookup" || field.type === "rollup") && options
        ? [String(options.linkFieldId)]
        : [];
    }),
  );
  return schema.fields.filter((field) => read.includes(field) || needed.has(field.id));
}

function scopeOf(schema: TableSchema) {
  return {
    organizationId: schema.organizationId,
    databaseId: schema.databaseId,
    tableId: schema.tableId,
  };
}

/**
 * A write's schema was older than the table's autonumber fields, or still had a field the write
 * holds a value for that is deleted: read it again and retry.
 */
class StaleSchema extends Error {}

/**
 * A field a create writes has a pending type change (`pending_type_change`) the create has not
 * checked its values against: read the pending changes and retry.
 */
class PendingChanges extends Error {}

/** Tries a write makes before it gives up with Unavailable (each stale one is a race lost). */
const WRITE_ATTEMPTS = 3;

/**
 * What `record`'s insert trigger answers a create that chose the jsonb storage for a table the
 * upgrade moved meanwhile (sql/record_count_change.sql).
 */
const RB_MOVED = "RB002";

/**
 * What PostgreSQL answers a statement built from an older schema than the table's user table
 * (or for a table moved out of `record` meanwhile, RB_MOVED):
 * a column or table that is gone, or a value of a column's old type (undefined_column,
 * undefined_table, datatype_mismatch, undefined_function, invalid_text_representation,
 * invalid_datetime_format, datetime_field_overflow), or a text too long for the index of a
 * field whose `max_length` was lowered since (program_limit_exceeded). Values are checked
 * against the schema before they are sent, so within one schema none of these can happen.
 */
const SCHEMA_MISMATCH = [
  "42703",
  "42P01",
  "42804",
  "42883",
  "22P02",
  "22007",
  "22008",
  "54000",
  RB_MOVED,
];

function schemaMismatch(error: unknown): boolean {
  return SCHEMA_MISMATCH.some((state) => hasSqlState(error, state));
}

/**
 * Whether PostgreSQL broke a deadlock by failing this write (deadlock_detected): two link writes
 * that lock records of both sides of a link whose inverse links one record (`writeLinks`) can
 * meet crosswise. The write rolled back whole, and is made again.
 */
function linkDeadlock(error: unknown): boolean {
  return hasSqlState(error, "40P01");
}

/**
 * Waits a little before a call retries with the schema read again: a schema change reaches the
 * user table just before catalog commits it, so for a few milliseconds catalog still answers
 * the schema the statement failed on.
 */
function beforeRetry(attempt: number): Promise<void> {
  return sleep(25 * attempt);
}

/** Why a create's gate refused it (thrown, so that a transaction rolls back). */
function refusedCreate(outcome: Exclude<GateOutcome, "ok">) {
  if (outcome === "stale") return new StaleSchema("the table's fields changed");
  if (outcome === "pending") return new PendingChanges("a field's type is changing");
  return outcome === "gone" ? tableNotFound() : recordLimitExceeded();
}

/**
 * A write's records over RECORD_MAX_BYTES (the write statement's builder measured them, and
 * nothing was sent) as the 400 naming each by its index in the request.
 */
function refusedSize(
  error: unknown,
  batch: boolean,
  requestIndex: (index: number) => number,
): never {
  if (!(error instanceof RecordsTooLarge)) throw error;
  throw recordsTooLarge(
    error.indexes.map((index) => (batch ? `records.${requestIndex(index)}.data` : "data")),
  );
}

/** Gives up on a write whose schema or pending changes kept changing. */
function fieldsKeptChanging(): ConnectError {
  return new ConnectError("the table's fields kept changing; try again", Code.Unavailable);
}

/** The fields (ids) that writes of `values` give a value (`write_gate` asks about those only). */
function fieldsWritten(values: readonly CheckedValues[]): string[] {
  const fields = new Set<string>();
  for (const checked of values) {
    // forEach, not for-of: no [id, value] array per value of every record of a batch.
    checked.forEach((value, id) => {
      if (value !== null) fields.add(id);
    });
  }
  return [...fields];
}

/**
 * The fields as a write is held to them while changes are pending: a field being made required
 * is required (migrations/required-marks.ts). The same array when none is.
 */
function withPendingRequired(
  fields: SchemaField[],
  pending: readonly PendingTypeChange[],
): SchemaField[] {
  const made = new Set(pending.filter((change) => change.required).map((c) => c.fieldId));
  if (!fields.some((field) => made.has(field.id) && !field.required)) return fields;
  return fields.map((field) => (made.has(field.id) ? { ...field, required: true } : field));
}

/**
 * The pending type changes (marks) of the fields that writes of `values` set: those a write
 * notes its records under (`notePendingWrites`), with whether the write's schema already holds
 * the field as the change makes it.
 */
function marksOf(
  schema: TableSchema,
  pending: readonly PendingTypeChange[],
  values: readonly CheckedValues[],
): CheckedMark[] {
  const fields = new Set(fieldsWritten(values));
  return pending
    .filter((change) => !change.required && fields.has(change.fieldId))
    .map((change) => {
      const field = schema.fields.find((f) => f.id === change.fieldId);
      return { id: change.id, asChanged: !!field && heldAsChanged(field, toOf(change)) };
    });
}

/** The field as a pending change makes it. */
function toOf(change: PendingTypeChange): FieldLike {
  return { type: change.toType as SchemaField["type"], options: change.toOptions };
}

/**
 * The values of a write that would not survive a pending type change of their field (its
 * conversion would clear them), as 400 items keyed by the field's name behind `prefix`.
 */
function pendingItems(
  schema: TableSchema,
  pending: readonly PendingTypeChange[],
  writes: readonly { values: CheckedValues; prefix: string }[],
): ValidationItem[] {
  const items: ValidationItem[] = [];
  for (const change of pending) {
    if (change.required) continue;
    const field = schema.fields.find((f) => f.id === change.fieldId);
    if (!field) continue;
    const to = toOf(change);
    for (const { values, prefix } of writes) {
      const value = values.get(change.fieldId);
      const problem =
        value === undefined ? undefined : pendingProblem(field, { fieldId: field.id, to }, value);
      if (problem)
        items.push({
          key: `${prefix}${field.name}`,
          message: problem,
          source: "body",
          code: "invalid_value",
        });
    }
  }
  return items;
}

/** An audit event `record.created` per record, every value set as a change. */
function auditCreated(
  changes: ChangeSet,
  schema: TableSchema,
  records: readonly { rowId: bigint; data: JsonObject }[],
): void {
  for (const record of records) {
    changes.auditRecord(
      scopeOf(schema),
      "created",
      record.rowId,
      valueChanges(schema.fields, {}, record.data),
    );
    changes.recordChanged(scopeOf(schema), createdChange(record.rowId, record.data));
  }
}

function batchSizeProblem(key: string, count: number, what: string): ValidationItem | undefined {
  if (count >= 1 && count <= RECORD_BATCH_MAX) return undefined;
  return {
    key,
    message: `must hold 1-${RECORD_BATCH_MAX} ${what}`,
    source: "body",
    code: "out_of_range",
  };
}

/**
 * Records of tables: the write path (values checked by the field-type registry, the plan's record
 * limit, autonumbers, audit events) and the read path (the query language over `data`). Every
 * write is all or nothing.
 */
export class Records {
  constructor(
    private readonly deps: {
      tx: Transactions;
      access: Access;
      plans: Plans;
      files: FileValues;
      /** Lists' statements, each alone on the read pool (its `statement_timeout` bounds them). */
      read: ReadStatement;
      /** Which storage holds each table's records. */
      tables: StoredTables;
      /** The per-table storage's field indexes, built as lists ask for them. */
      indexes?: TableIndexes;
      /** Where every create takes its row ids (a block of them for small creates). */
      rowIds: RowIdBlock;
    },
  ) {}

  /**
   * Reads with `read` against the table's schema; when PostgreSQL answers that the statement's
   * schema is older than the table's user table, once more with the schema read again from
   * catalog.
   */
  private async reading<T>(
    call: Call,
    table: TableRef,
    read: (schema: TableSchema, rows: TableRows, linked: LinkedSchemas) => Promise<T>,
    /** Whether a read found nothing: on `record`, the table may have moved meanwhile. */
    foundNothing: (result: T) => boolean,
  ): Promise<T> {
    let { schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "read");
    for (let attempt = 1; ; attempt++) {
      try {
        const { rows, linked } = await this.rowsFor(schema, call.requestId);
        const result = await read(schema, rows, linked);
        if (!foundNothing(result) || !(await this.movedMeanwhile(schema, rows))) return result;
        continue;
      } catch (error) {
        if (!schemaMismatch(error) || attempt === WRITE_ATTEMPTS) throw error;
      }
      await beforeRetry(attempt);
      ({ schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "read", {
        fresh: true,
      }));
    }
  }

  /**
   * The statements' view of the table's records (`StoredTables.rowsOf`), with the fields of the
   * tables its links name, which its link values show.
   */
  private async rowsFor(
    schema: TableSchema,
    requestId: string,
  ): Promise<{ rows: TableRows; linked: LinkedSchemas }> {
    const linked = hasLinks(schema.fields)
      ? await this.deps.access.linked(schema, requestId)
      : new Map<string, readonly SchemaField[]>();
    return { rows: await this.deps.tables.rowsOf(schema, linked), linked };
  }

  /**
   * The link values a write sets, in the write's transaction (`writeLinks`, a field at a time):
   * `writes` are the written records with their checked values and the request's data (for
   * the keys a refusal names). A create skips the links it leaves empty.
   */
  private async writeLinksOf(
    em: EntityManager,
    schema: TableSchema,
    linked: LinkedSchemas,
    writes: readonly {
      rowId: bigint;
      values: CheckedValues;
      data: JsonObject | undefined;
      prefix: string;
    }[],
    create: boolean,
  ): Promise<void> {
    for (const link of linkStoragesOf(schema.organizationId, schema.fields, linked)) {
      const field = link.field;
      const values: LinkWrite[] = [];
      for (const write of writes) {
        if (!write.values.has(field.id)) continue;
        const ids = (write.values.get(field.id) ?? []) as number[];
        if (create && ids.length === 0) continue;
        values.push({
          rowId: write.rowId,
          ids,
          key: valueKey(schema.fields, write.data, field, write.prefix),
        });
      }
      await writeLinks(em, link, values);
    }
  }

  /**
   * Written records as a write answers them: read again in the write's transaction when the
   * table has links, whose values show the linked records (a write holds their ids).
   */
  private async shown(
    em: EntityManager,
    schema: TableSchema,
    rows: TableRows,
    records: readonly StoredRecord[],
    what: "create" | "update",
  ): Promise<StoredRecord[]> {
    if (!hasLinks(schema.fields) || records.length === 0) return [...records];
    const found = await findRecords(
      em,
      schema.tableId,
      records.map((record) => record.rowId),
      { lock: false },
      rows,
    );
    if (found === "over_budget") throw batchTooLarge("records", what);
    const byId = new Map(found.map((record) => [record.rowId, record]));
    return records.map((record) => byId.get(record.rowId) ?? record);
  }

  /**
   * Whether a statement on `record` that found nothing may have missed the table's records
   * because the upgrade moved them meanwhile (its move waits for the writes it holds up, not for
   * reads): then the call is made again on the table's own storage.
   */
  private async movedMeanwhile(schema: TableSchema, rows: TableRows): Promise<boolean> {
    return rows === RECORD_ROWS && (await this.deps.tables.inUserTable(schema.tableId));
  }

  /**
   * Whether a write that did not find its records on `record` (`legacy`: the table was not
   * registered when it started) missed them because the upgrade moved the table meanwhile.
   */
  private async missedMove(error: unknown, schema: TableSchema, legacy: boolean): Promise<boolean> {
    return (
      legacy &&
      errorInfoOf(error)?.reason === "record_not_found" &&
      (await this.deps.tables.inUserTable(schema.tableId))
    );
  }

  /**
   * Creates records in request order. Every bad value of every record is
   * listed (in a batch under `records.<index>.data.<key>`), and then nothing is written.
   */
  async create(
    call: Call,
    table: TableRef,
    inputs: readonly (JsonObject | undefined)[],
    batch: boolean,
  ): Promise<RecordsView> {
    if (batch) {
      const problem = batchSizeProblem("records", inputs.length, "records");
      if (problem) throw validationFailed([problem]);
    }
    let { schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "write", {
      create: true,
    });
    let fresh = false;
    let pending: PendingTypeChange[] = [];
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.createWith(call, schema, inputs, batch, fresh, pending);
      } catch (error) {
        const mismatch = schemaMismatch(error) || linkDeadlock(error);
        if (!(error instanceof StaleSchema || error instanceof PendingChanges || mismatch)) {
          throw error;
        }
        if (attempt === WRITE_ATTEMPTS) throw fieldsKeptChanging();
        if (error instanceof PendingChanges) {
          pending = await pendingTypeChanges(this.deps.tx.em(), schema.tableId);
          continue;
        }
        if (mismatch) await beforeRetry(attempt);
      }
      // The table's fields changed after `schema` was read (see the gate's `stale`, and
      // `takeAutonumbers` for a deleted autonumber field): read it again from catalog.
      ({ schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "write", {
        fresh: true,
        create: true,
      }));
      fresh = true;
    }
  }

  /**
   * `create` against one schema; `fresh`: just read from catalog, not checked for autonumber
   * fields it lacks. The values must also convert to the `pending` type changes of their fields.
   */
  private async createWith(
    call: Call,
    schema: TableSchema,
    inputs: readonly (JsonObject | undefined)[],
    batch: boolean,
    fresh: boolean,
    pending: readonly PendingTypeChange[],
  ): Promise<RecordsView> {
    const items: ValidationItem[] = [];
    const checked: CheckedValues[] = [];
    const fields = withPendingRequired(schema.fields, pending);
    inputs.forEach((data, index) => {
      const result = checkInput(fields, data, "create", batch ? `records.${index}.data.` : "");
      if (result.ok) checked.push(result.values);
      else items.push(...result.items);
    });
    const links = hasLinks(schema.fields);
    if (items.length === 0) {
      const writes = checked.map((values, index) => ({
        values,
        prefix: batch ? `records.${index}.data.` : "",
      }));
      items.push(...pendingItems(schema, pending, writes));
    }
    if (items.length > 0) throw validationFailed(items);
    const quota = await this.deps.plans.quotaOf(schema.organizationId, call.requestId);
    const { rows, linked } = await this.rowsFor(schema, call.requestId);
    const datas = checked.map((values) =>
      applyValues({}, emptyLinksCleared(schema.fields, values)),
    );
    const autonumbers = schema.fields.filter((field) => field.type === "autonumber");
    const gate = {
      tableId: schema.tableId,
      organizationId: schema.organizationId,
      limit: quota.records,
      autonumberFields: fresh ? null : autonumbers.map((field) => field.id),
      fields: fieldsWritten(checked),
      pendingChecked: pending.map((change) => change.id),
    };
    // A new row has no file yet (row ids are never reused, and an upload needs the committed
    // row), so files is not asked: a create must not fail with 503 after it committed. A create
    // checked against pending type changes notes its records, in a transaction.
    const marks = marksOf(schema, pending, checked);
    // The records' size is measured as the statement serializes them (RECORD_MAX_BYTES).
    const tooLarge = (error: unknown) => refusedSize(error, batch, (index) => index);
    // A table with links writes them in the create's transaction.
    if (autonumbers.length === 0 && marks.length === 0 && !links) {
      return this.deps.tx.once(call, async (changes) => {
        const rowIds = await this.deps.rowIds.take(changes.em, datas.length);
        const created = rowIds.map((rowId, index) => ({ rowId, data: datas[index]! }));
        auditCreated(changes, schema, created);
        const outcome = await createRecords(
          changes.em,
          { ...gate, actor: actorName(call.principal), rows },
          created,
          changes.takeEvents(),
        ).catch(tooLarge);
        if (outcome.outcome !== "ok") throw refusedCreate(outcome.outcome);
        return { schema, records: outcome.records, files: new Map() };
      });
    }

    // Autonumbers are taken in the transaction, so that a refused create gives none away.
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      await lockForCreate(em, schema.tableId, schema.organizationId);
      for (const field of autonumbers) {
        const first = await takeAutonumbers(em, schema.tableId, field.id, datas.length);
        if (first === undefined) throw new StaleSchema(`autonumber field ${field.id} is deleted`);
        datas.forEach((data, index) => {
          data[field.id] = first + index;
        });
      }
      const records = await insertRecords(
        em,
        {
          tableId: schema.tableId,
          organizationId: schema.organizationId,
          actor: actorName(call.principal),
          rows,
        },
        datas,
        await this.deps.rowIds.take(em, datas.length),
      ).catch(tooLarge);
      await this.writeLinksOf(
        em,
        schema,
        linked,
        records.map((record, index) => ({
          rowId: record.rowId,
          values: checked[index]!,
          data: inputs[index],
          prefix: batch ? `records.${index}.data.` : "",
        })),
        true,
      );
      await notePendingWrites(
        em,
        schema.tableId,
        marks,
        records.map((record) => record.rowId),
      );
      auditCreated(changes, schema, records);
      // Last, with the events: the organization's usage lock is held from here to the commit
      // (near the plan's limit, every create of the organization waits for it).
      const outcome = await passCreateGate(em, gate, records.length, changes.takeEvents());
      if (outcome !== "ok") throw refusedCreate(outcome);
      return {
        schema,
        records: await this.shown(em, schema, rows, records, "create"),
        files: new Map(),
      };
    });
  }

  /** A record with the fields `fields` selects, all when it is empty. */
  async get(call: Call, table: TableRef, rowId: bigint, fieldList = ""): Promise<RecordView> {
    const { schema, fields, record } = await this.reading(
      call,
      table,
      async (schema, rows) => {
        const fields = selectedFields(schema, fieldList);
        const record = await findRecord(this.deps.tx.em(), schema.tableId, rowId, rows);
        return { schema, fields, record };
      },
      (found) => !found.record,
    );
    if (!record) throw recordNotFound();
    const files = await this.deps.files.of(fields, [record.rowId], call.requestId);
    return { schema, record, fields, files };
  }

  /**
   * A page of the records matching `where`, in `sort` order with row_id breaking ties, and the
   * count of all matches, read in one statement (`pageWithTotal`). A page whose records hold
   * more than PAGE_MAX_BYTES of values is refused: PostgreSQL never sends it.
   */
  async list(call: Call, table: TableRef, params: ListParams): Promise<ListView> {
    const { schema, page, fields, found } = await this.reading(
      call,
      table,
      async (schema, rows, linked) => {
        const storage = rows === RECORD_ROWS ? "jsonb" : "columns";
        const indexes = this.deps.indexes;
        const fields = selectedFields(schema, params.fields);
        const page = listQuery(
          schema,
          params,
          storage,
          indexes?.served(schema.tableId),
          linked,
          fields,
        );
        indexes?.noteQuery(schema, page.indexCandidates);
        return { schema, page, fields, found: await pageWithTotal(this.deps.read, page) };
      },
      (read) => read.found !== "over_budget" && read.found.records.length === 0,
    );
    if (found === "over_budget") throw pageTooLarge();
    const { records, total, estimated, hasMore } = found;
    const files = await this.deps.files.of(
      fields,
      records.map((record) => record.rowId),
      call.requestId,
    );
    return {
      schema,
      records,
      files,
      fields,
      total,
      totalEstimated: estimated,
      hasMore,
      limit: page.limit,
      offset: page.offset,
    };
  }

  /** Changes the named fields of records of the table, all or none. */
  async update(
    call: Call,
    table: TableRef,
    patches: readonly { rowId: bigint; data: JsonObject | undefined }[],
    batch: boolean,
  ): Promise<RecordsView> {
    let { schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "write");
    for (let attempt = 1; ; attempt++) {
      const legacy = !(await this.deps.tables.inUserTable(schema.tableId));
      try {
        return await this.updateWith(call, schema, patches, batch);
      } catch (error) {
        const mismatch =
          schemaMismatch(error) ||
          linkDeadlock(error) ||
          (await this.missedMove(error, schema, legacy));
        if (!(error instanceof StaleSchema || mismatch)) throw error;
        if (attempt === WRITE_ATTEMPTS) throw fieldsKeptChanging();
        if (mismatch) await beforeRetry(attempt);
      }
      // A field the update writes was deleted after `schema` was read (`write_gate`'s `stale`):
      // read it again from catalog.
      ({ schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "write", {
        fresh: true,
      }));
    }
  }

  /** `update` against one schema. */
  private async updateWith(
    call: Call,
    schema: TableSchema,
    patches: readonly { rowId: bigint; data: JsonObject | undefined }[],
    batch: boolean,
  ): Promise<RecordsView> {
    const items: ValidationItem[] = [];
    if (batch) {
      const problem = batchSizeProblem("records", patches.length, "records");
      if (problem) throw validationFailed([problem]);
    }
    const checked: CheckedValues[] = [];
    const seen = new Map<bigint, number>();
    patches.forEach((patch, index) => {
      const prefix = batch ? `records.${index}.` : "";
      const first = seen.get(patch.rowId);
      if (first !== undefined) {
        items.push({
          key: `${prefix}row_id`,
          message: `appears more than once (first at records.${first})`,
          source: "body",
          code: "invalid_value",
        });
      }
      seen.set(patch.rowId, first ?? index);
      const result = checkInput(schema.fields, patch.data, "update", batch ? `${prefix}data.` : "");
      if (result.ok) checked.push(emptyLinksCleared(schema.fields, result.values));
      else items.push(...result.items);
    });
    if (items.length > 0) throw validationFailed(items);
    // Asked before writing: an update does not change files, and files being unreachable then
    // refuses the request with nothing written instead of failing after the commit.
    const rowIds = patches.map((patch) => patch.rowId);
    const files = await this.deps.files.of(schema.fields, rowIds, call.requestId);
    const { rows, linked } = await this.rowsFor(schema, call.requestId);
    // A table with links writes them in the update's transaction.
    if (!batch && patches.length === 1 && !hasLinks(schema.fields)) {
      const updated = await this.updateOneAsRead(
        call,
        schema,
        rows,
        patches[0]!.rowId,
        checked[0]!,
      );
      if (updated) return { schema, records: [updated], files };
    }

    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const locked = await lockRecordsForWrite(
        em,
        schema.tableId,
        rowIds,
        { fields: fieldsWritten(checked), pendingChecked: [] },
        rows,
      );
      if (locked === "over_budget") throw batchTooLarge("records", "update");
      const { records: found, outcome } = locked;
      if (found.length !== rowIds.length) throw recordNotFound();
      if (outcome === "stale") throw new StaleSchema("a field the update writes is deleted");
      if (outcome === "pending") {
        // The table's shared lock, held from the gate to the commit, keeps these the only ones.
        const pending = await pendingTypeChanges(em, schema.tableId);
        const writes = checked.map((values, index) => ({
          values,
          prefix: batch ? `records.${index}.data.` : "",
        }));
        const problems = pendingItems(schema, pending, writes);
        const fields = withPendingRequired(schema.fields, pending);
        if (fields !== schema.fields) {
          patches.forEach((patch, index) => {
            const prefix = batch ? `records.${index}.data.` : "";
            const result = checkInput(fields, patch.data, "update", prefix);
            if (!result.ok) problems.push(...result.items);
          });
        }
        if (problems.length > 0) throw validationFailed(problems);
        await notePendingWrites(em, schema.tableId, marksOf(schema, pending, checked), rowIds);
      }
      // Links as row ids, as a change compares and records them.
      const byId = new Map(
        found.map((record) => [record.rowId, withLinkIds(schema.fields, record)]),
      );
      // `index`: the patch's in the request, which a refusal of the record's size names.
      const writes: { rowId: bigint; data: JsonObject; index: number }[] = [];
      patches.forEach((patch, index) => {
        const before = byId.get(patch.rowId)!;
        const data = applyValues(before.data, checked[index]!);
        const changed = valueChanges(schema.fields, before.data, data);
        if (changed.length > 0) {
          writes.push({ rowId: patch.rowId, data, index });
          changes.auditRecord(scopeOf(schema), "updated", patch.rowId, changed);
          changes.recordChanged(scopeOf(schema), updatedChange(before, data, changed));
        }
      });
      await this.writeLinksOf(
        em,
        schema,
        linked,
        writes.map((write) => ({
          rowId: write.rowId,
          values: checked[write.index]!,
          data: patches[write.index]!.data,
          prefix: batch ? `records.${write.index}.data.` : "",
        })),
        false,
      );
      const written =
        writes.length > 0
          ? await writeRecords(
              em,
              actorName(call.principal),
              writes,
              changes.takeEvents(),
              rows,
            ).catch((error) => refusedSize(error, batch, (index) => writes[index]!.index))
          : [];
      for (const after of written) byId.set(after.rowId, after);
      const records = rowIds.map((rowId) => byId.get(rowId)!);
      return { schema, records: await this.shown(em, schema, rows, records, "update"), files };
    });
  }

  /**
   * A single record's update without a transaction, the common case: the record is read with its
   * row version, and one statement passes `write_gate`, writes the record only if it is still that
   * version and takes its audit event along (`writeRecordIfUnchanged`), two round trips instead
   * of the transaction's four (BEGIN, the locking read, the write, COMMIT). Undefined when that
   * statement wrote nothing (the record changed in between, or the gate did not answer `ok`)
   * and when the update changes nothing (the transaction then checks it against pending type
   * changes): `updateWith` then updates in a transaction, which locks the record and handles
   * what the gate answered.
   */
  private async updateOneAsRead(
    call: Call,
    schema: TableSchema,
    rows: TableRows,
    rowId: bigint,
    values: CheckedValues,
  ): Promise<StoredRecord | undefined> {
    const read = await readRecordVersion(this.deps.tx.em(), schema.tableId, rowId, rows);
    if (!read) throw recordNotFound();
    const data = applyValues(read.record.data, values);
    const changed = valueChanges(schema.fields, read.record.data, data);
    if (changed.length === 0) return undefined;
    return this.deps.tx.once(call, async (changes) => {
      changes.auditRecord(scopeOf(schema), "updated", rowId, changed);
      changes.recordChanged(scopeOf(schema), updatedChange(read.record, data, changed));
      const write = {
        tableId: schema.tableId,
        rowId,
        version: read.version,
        actor: actorName(call.principal),
        data,
        fields: fieldsWritten([values]),
        rows,
      };
      return writeRecordIfUnchanged(changes.em, write, changes.takeEvents()).catch((error) =>
        refusedSize(error, false, (index) => index),
      );
    });
  }

  /**
   * Deletes records of the table, all or none: an id that is not a record of the table refuses
   * the whole request with record_not_found and deletes nothing. Repeated ids count once.
   */
  async delete(
    call: Call,
    table: TableRef,
    rawRowIds: readonly bigint[],
    batch: boolean,
  ): Promise<bigint[]> {
    let { schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "write");
    if (batch) {
      const problem = batchSizeProblem("row_ids", rawRowIds.length, "ids");
      if (problem) throw validationFailed([problem]);
    }
    const rowIds = [...new Set(rawRowIds)];
    for (let attempt = 1; ; attempt++) {
      const legacy = !(await this.deps.tables.inUserTable(schema.tableId));
      try {
        return await this.deleteWith(call, schema, rowIds);
      } catch (error) {
        if (!(schemaMismatch(error) || (await this.missedMove(error, schema, legacy)))) {
          throw error;
        }
        if (attempt === WRITE_ATTEMPTS) throw fieldsKeptChanging();
      }
      // A deleted field's column or a converted one, or the table itself, went after `schema`
      // was read: read it again from catalog (a deleted table is then table_not_found).
      await beforeRetry(attempt);
      ({ schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "write", {
        fresh: true,
      }));
    }
  }

  /** `delete` against one schema. */
  private async deleteWith(
    call: Call,
    schema: TableSchema,
    rowIds: readonly bigint[],
  ): Promise<bigint[]> {
    // A deleted record's links go with it (the junctions' foreign keys cascade); its audit and
    // change events hold their row ids, which need no linked table's fields.
    const rows = await this.deps.tables.rowsOf(schema);
    if (rowIds.length === 1 && (await this.deleteOneAsRead(call, schema, rows, rowIds[0]!))) {
      return [...rowIds];
    }
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      // Behind `write_gate`, as an update: a table being converted refuses the delete at once.
      const locked = await lockRecordsForWrite(
        em,
        schema.tableId,
        rowIds,
        { fields: [], pendingChecked: [] },
        rows,
      );
      if (locked === "over_budget") throw batchTooLarge("row_ids", "delete");
      const found = locked.records;
      if (found.length !== rowIds.length) throw recordNotFound();
      await deleteRecords(em, schema.tableId, rowIds, rows);
      await this.announceDeletion(changes, schema, found);
      // Last, with the events, as in create.
      await releaseRecords(em, schema.organizationId, found.length, changes.takeEvents());
      return [...rowIds];
    });
  }

  /**
   * A single record's deletion without a transaction, as `updateOneAsRead` updates one: the
   * record read with its row version, then one statement that deletes it only if it is still
   * that version, gives the organization's count back and writes the events (the audit event
   * holds the values read). False when that statement deleted nothing (the record changed or
   * went in between): `delete` then deletes in a transaction, which locks what it reads.
   */
  private async deleteOneAsRead(
    call: Call,
    schema: TableSchema,
    rows: TableRows,
    rowId: bigint,
  ): Promise<boolean> {
    const read = await readRecordVersion(this.deps.tx.em(), schema.tableId, rowId, rows);
    if (!read) throw recordNotFound();
    return this.deps.tx.once(call, async (changes) => {
      await this.announceDeletion(changes, schema, [read.record]);
      const target = {
        tableId: schema.tableId,
        organizationId: schema.organizationId,
        rowId,
        version: read.version,
        rows,
      };
      return deleteRecordIfUnchanged(changes.em, target, changes.takeEvents());
    });
  }

  private async announceDeletion(
    changes: ChangeSet,
    schema: TableSchema,
    records: readonly StoredRecord[],
  ): Promise<void> {
    for (const read of records) {
      const record = withLinkIds(schema.fields, read);
      changes.auditRecord(
        scopeOf(schema),
        "deleted",
        record.rowId,
        valueChanges(schema.fields, record.data, {}),
      );
      changes.recordChanged(scopeOf(schema), deletedChange(record, schema.fields));
    }
    await changes.publish(SUBJECTS.recordsDeleted, RecordsDeletedSchema, {
      organizationId: schema.organizationId,
      tableId: schema.tableId,
      rowIds: records.map((record) => record.rowId),
    });
  }

  /** What the table's records hold, for any member or token that may read them. */
  async recordSchema(call: Call, table: TableRef): Promise<RecordSchema> {
    const { schema } = await this.deps.access.table(call, table.tableId, table.databaseId, "read");
    return recordSchemaOf(schema);
  }

  /** Internal: where a record lives. */
  async resolve(rowId: bigint): Promise<{ tableId: bigint; organizationId: bigint }> {
    const home = await this.deps.tables.homeOf(rowId);
    if (!home) throw recordNotFound();
    return home;
  }
}
