import type { EntityManager, Kysely } from "@mikro-orm/postgresql";
import { hasSqlState, type Logger, query, type TableSchema } from "@rowbase/kit";
import {
  EMAIL_MAX_LENGTH,
  type FieldLike,
  PHONE_MAX_LENGTH,
  textLimitOf,
} from "@rowbase/kit/field-types";
import { columnTypeOf, type StoredField } from "./columns.js";
import { fieldColumn, fieldIndex, idText, organizationSchema, userTable } from "./names.js";

/**
 * The index policy of the per-table storage (docs/records-storage.md, "Index policy"): the
 * first time a list filters on a field or sorts by it, a btree on the expression the query
 * compiler reads the field by is built in the background, with `CREATE INDEX CONCURRENTLY`, on a
 * table of at least MIN_RECORDS records, at most MAX_FIELD_INDEXES of them per table. A filter
 * that ANDs an equality with a second condition gets one btree of both fields' columns instead
 * (`indexKeysOf`), from which its exact count is read without touching the table.
 *
 * What exists is read from PostgreSQL's own catalog (`pg_index`, by the indexes' names), so a
 * restart, or another records process, sees the same indexes and the same count towards the
 * cap; nothing else is kept besides this process's memory of what it asked for lately.
 */

/** Below this many records a page reads the whole table in a few milliseconds: no field index. */
export const MIN_RECORDS = 10_000;

/** How many field indexes a table gets: the first ones asked for. */
export const MAX_FIELD_INDEXES = 3;

/**
 * The fields of one field index, in its columns' order: one field, or two (an equality's field
 * first). Its text form (`keyText`) is the ids joined by commas, a single field's being its id.
 */
export type IndexKey = readonly [string] | readonly [string, string];

export function keyText(key: IndexKey): string {
  return key.join(",");
}

/**
 * The indexes a list could use, under the policy: for a filter that ANDs at its top level an
 * equality (`eq`, `in`) on an indexed field with a second equality or a range on another, one
 * index of the two (the equality's first), which serves both conditions and counts the matches
 * from the index alone; for any other filter, one per field it reads (`filter`). Then one per
 * field the sort orders by that the filter's do not hold already (`sort`); the first sort field's
 * is of two fields, `(equality's field, sort field)`, when the filter ANDs an `eq` of one value
 * on another indexed field, since that index hands over the matching rows in the page's order
 * where the sort field's own would be walked past every row the equality refuses. Fields that
 * get no index (`fieldIndexExpression`) are left out, and so is the pair for a select's order
 * (by its choices' order, which no index keeps).
 */
export function indexKeysOf(
  schema: TableSchema,
  filter: {
    fieldIds: readonly string[];
    conjuncts: { equalities: string[]; ranges: string[]; exact: string[] };
  },
  sortedFieldIds: readonly string[],
): { filter: IndexKey[]; sort: IndexKey[] } {
  const fieldOf = (id: string) => schema.fields.find((f) => f.id === id);
  const indexed = (id: string) => {
    const field = fieldOf(id);
    return field !== undefined && fieldIndexExpression(storedField(field)) !== undefined;
  };
  const equalities = [...new Set(filter.conjuncts.equalities.filter(indexed))];
  const [first] = equalities;
  const second = equalities[1] ?? filter.conjuncts.ranges.find((id) => indexed(id) && id !== first);
  const filterKeys: IndexKey[] =
    first !== undefined && second !== undefined
      ? [[first, second]]
      : filter.fieldIds.filter(indexed).map((id): IndexKey => [id]);
  const sortKeys: IndexKey[] = [];
  [...new Set(sortedFieldIds)].forEach((id, position) => {
    const held = filterKeys.some((key) => key.length === 1 && key[0] === id);
    if (!indexed(id) || held) return;
    const type = fieldOf(id)?.type;
    const ordered = position === 0 && type !== "single_select";
    const exact = ordered ? filter.conjuncts.exact.find((e) => e !== id && indexed(e)) : undefined;
    sortKeys.push(exact === undefined ? [id] : [exact, id]);
  });
  return { filter: filterKeys, sort: sortKeys };
}

/**
 * The fields whose index keeps the page's rows in their sort order, among `served`
 * (`TableIndexes.served`): those of one field, and the sort field of a pair `indexKeysOf` gave
 * for the sort, whose equality fixes the first column.
 */
export function orderedBy(served: ReadonlySet<string>, sortKeys: readonly IndexKey[]): Set<string> {
  const ordered = new Set(served);
  for (const key of sortKeys) {
    if (key.length === 2 && served.has(keyText(key))) ordered.add(key[1]);
  }
  return ordered;
}

/**
 * The longest text (in characters) a field may hold for its column to get an index: a btree
 * entry holds at most 2,704 bytes, and 600 characters of 4 bytes each stay below it. A longer
 * value would make the insert that writes it fail.
 */
export const INDEXED_TEXT_MAX_LENGTH = 600;

/** The longest value of each text-like type (in characters). */
function textLimit(field: FieldLike): number | undefined {
  switch (field.type) {
    case "text":
      return textLimitOf(field);
    case "email":
      return EMAIL_MAX_LENGTH;
    case "phone":
      return PHONE_MAX_LENGTH;
    default:
      // A URL may hold 2,048 characters: no index.
      return undefined;
  }
}

/**
 * The index element a field's index is built on (the expression the query compiler compares
 * and sorts the field by, since an index serves only that), or undefined for a field that gets
 * none: a number, date, datetime, autonumber or single select's bare column (a select sorts by
 * its choices' order, which no index keeps, but its `eq`, `in` and blank checks are served); a
 * text, email or phone field's text in code point order, blank as NULL, when its longest value
 * fits a btree entry. Booleans (a filter matches about half the table), long texts, URLs, JSON
 * and multi selects get none.
 */
export function fieldIndexExpression(field: StoredField): string | undefined {
  if (!columnTypeOf(field.type)) return undefined;
  const column = fieldColumn(field.id);
  switch (field.type) {
    case "number":
    case "date":
    case "datetime":
    case "autonumber":
    case "single_select":
      return `(${column})`;
    case "text":
    case "email":
    case "phone": {
      const limit = textLimit(field);
      return limit !== undefined && limit <= INDEXED_TEXT_MAX_LENGTH
        ? `((nullif(${column}, '') COLLATE "C"))`
        : undefined;
    }
    default:
      return undefined;
  }
}

/**
 * The statement that builds the index of one field, or of two (`IndexKey`), or undefined when
 * one of them gets none.
 */
export function createFieldIndexSql(
  organizationId: bigint,
  tableId: bigint,
  fields: readonly [StoredField] | readonly [StoredField, StoredField],
): string | undefined {
  const expressions = fields.map(fieldIndexExpression);
  if (expressions.some((expression) => expression === undefined)) return undefined;
  return `create index concurrently if not exists ${indexName(
    tableId,
    fields.map((f) => f.id),
  )}
    on ${userTable(organizationId, tableId)} (${expressions.join(", ")})`;
}

function indexName(tableId: bigint, fieldIds: readonly bigint[]): string {
  const [first, second] = fieldIds as [bigint, bigint?];
  return second === undefined ? fieldIndex(tableId, first) : fieldIndex(tableId, first, second);
}

/** The statement that drops a field index without blocking the table's reads and writes. */
export function dropFieldIndexConcurrentlySql(
  organizationId: bigint,
  tableId: bigint,
  key: IndexKey,
): string {
  return `drop index concurrently if exists ${organizationSchema(organizationId)}.${indexName(tableId, key.map(BigInt))}`;
}

/**
 * What a change of a field's type or options that keeps its column (`changeFieldType` in
 * place) does to its index: drops it when the field is no longer indexed on the same
 * expression, such as a text field whose `max_length` grows past INDEXED_TEXT_MAX_LENGTH or
 * that becomes a long text (whose values would no longer fit the index) or a single select.
 * Run in the change's transaction, which holds the table's write lock, so no write lands
 * between the change and the drop. A change through a shadow column drops the index as it swaps
 * the columns.
 */
export function fieldIndexChangeSql(
  organizationId: bigint,
  tableId: bigint,
  from: StoredField,
  to: StoredField,
): string[] {
  if (fieldIndexExpression(from) === fieldIndexExpression(to)) return [];
  return [dropFieldIndexSql(organizationId, tableId, to.id)];
}

/**
 * The statement that drops, in a schema change's transaction, every field index that reads a
 * field's column: its own and those of two fields it is one of (found through the indexes'
 * dependencies on the column, `pg_depend`).
 */
export function dropFieldIndexSql(
  organizationId: bigint,
  tableId: bigint,
  fieldId: bigint,
): string {
  const schema = organizationSchema(organizationId);
  const prefix = `${fieldIndex(tableId, 1n).slice(0, -1).replaceAll("_", "\\_")}%`;
  return `do $drop$ declare name text; begin
    for name in
      select distinct c.relname from pg_index i
        join pg_class c on c.oid = i.indexrelid
        join pg_depend d on d.classid = 'pg_class'::regclass and d.objid = i.indexrelid
          and d.refclassid = 'pg_class'::regclass and d.refobjid = i.indrelid
        join pg_attribute a on a.attrelid = i.indrelid and a.attnum = d.refobjsubid
      where i.indrelid = to_regclass('${userTable(organizationId, tableId)}')
        and a.attname = '${fieldColumn(fieldId)}' and c.relname like '${prefix}'
    loop
      execute format('drop index %I.%I', '${schema}', name);
    end loop;
  end $drop$`;
}

/**
 * Cancels the index builds running on a user table, or on every table of the organization's
 * schema without `tableId` (in any process), so that DDL does not wait for one: a build holds a
 * lock that DDL waits for, and itself waits for every older transaction, the DDL's among them,
 * to end, which PostgreSQL would break by failing one of the two. The cancelled build leaves an
 * INVALID index, dropped and built again later. Run first in the DDL's transaction.
 */
export function cancelIndexBuildsSql(organizationId: bigint, tableId?: bigint): string {
  const tables =
    tableId === undefined
      ? `(select oid from pg_class where relnamespace = to_regnamespace('${organizationSchema(organizationId)}'))`
      : `(to_regclass('${userTable(organizationId, tableId)}'))`;
  return `select pg_cancel_backend(pid) from pg_stat_progress_create_index
    where datid = (select oid from pg_database where datname = current_database())
      and relid in ${tables}`;
}

export interface TableIndexesOptions {
  minRecords: number;
  maxFieldIndexes: number;
  /** How long a field asked for is not looked at again, and a table's indexes not read again. */
  recheckMs: number;
  /** How long a field whose build failed is left alone. */
  retryMs: number;
  /** A build's `lock_timeout`: it waits for older transactions (lists: up to their 10 s). */
  lockTimeoutMs: number;
  /** A build's `statement_timeout`. */
  statementTimeoutMs: number;
}

const DEFAULTS: TableIndexesOptions = {
  minRecords: MIN_RECORDS,
  maxFieldIndexes: MAX_FIELD_INDEXES,
  recheckMs: 60_000,
  retryMs: 15 * 60_000,
  lockTimeoutMs: 15_000,
  statementTimeoutMs: 30 * 60_000,
};

/** What this process knows of a table's field indexes. */
interface TableState {
  /** The valid indexes (`keyText`), as last read from the catalog. */
  served: Set<string>;
  /** When the catalog was last read (or asked to be). */
  checkedAt: number;
  /** Indexes asked for (`keyText`), and until when they are not looked at again. */
  quietUntil: Map<string, number>;
}

/** A table whose field indexes are to be looked at, and built where the policy says. */
interface Job {
  organizationId: bigint;
  keys: Map<string, IndexKey>;
}

type Run = <R extends object = Record<string, unknown>>(
  sql: string,
  params?: readonly unknown[],
) => Promise<R[]>;

/**
 * Builds user tables' field indexes on demand, one at a time in the background: `noteQuery`
 * returns at once, and a list is never held up or failed by it (a failed build is logged and
 * tried again later). Across processes a table's builds take turns through an advisory lock.
 */
export class TableIndexes {
  private readonly options: TableIndexesOptions;
  private readonly tables = new Map<bigint, TableState>();
  private readonly pending = new Map<bigint, Job>();
  private readonly failedUntil = new Map<string, number>();
  private working: Promise<void> | undefined;
  /** The backend of the job under way, which `close` cancels. */
  private backend: number | undefined;
  private closed = false;

  constructor(
    private readonly deps: {
      em: EntityManager;
      /** The table's schema as catalog has it now (a field may have changed since the list). */
      schemaOf: (tableId: bigint) => Promise<TableSchema | undefined>;
      logger: Logger;
    },
    options: Partial<TableIndexesOptions> = {},
  ) {
    this.options = { ...DEFAULTS, ...options };
  }

  /**
   * The table's valid field indexes (`keyText`: a field's id, or two ids joined by a comma), as
   * last read from the catalog: a list's page may take its order from a field's, and count a
   * filter's matches from the filter's (`listQuery`). Stale knowledge costs only speed: the
   * page's answer is the same with or without an index.
   */
  served(tableId: bigint): ReadonlySet<string> {
    return this.tables.get(tableId)?.served ?? new Set();
  }

  /**
   * Notes that a list of the table could use these indexes (`indexKeysOf`): those that get an
   * index under the policy and have none are built in the background. Returns at once.
   */
  noteQuery(schema: TableSchema, keys: readonly IndexKey[]): void {
    if (this.closed || keys.length === 0) return;
    const now = Date.now();
    let state = this.tables.get(schema.tableId);
    if (!state) {
      state = { served: new Set(), checkedAt: 0, quietUntil: new Map() };
      this.tables.set(schema.tableId, state);
    }
    const wanted = keys.filter((key) => {
      const text = keyText(key);
      if (state.served.has(text) || (state.quietUntil.get(text) ?? 0) > now) return false;
      return key.every((id) => {
        const field = schema.fields.find((f) => f.id === id);
        return field !== undefined && fieldIndexExpression(storedField(field)) !== undefined;
      });
    });
    if (wanted.length === 0 && now - state.checkedAt < this.options.recheckMs) return;
    state.checkedAt = now;
    for (const key of wanted) state.quietUntil.set(keyText(key), now + this.options.recheckMs);
    const job = this.pending.get(schema.tableId) ?? {
      organizationId: schema.organizationId,
      keys: new Map<string, IndexKey>(),
    };
    for (const key of wanted) job.keys.set(keyText(key), key);
    this.pending.set(schema.tableId, job);
    this.working ??= this.work().finally(() => {
      this.working = undefined;
    });
  }

  /** Resolves when no job is waiting or running (tests, and `close`). */
  async idle(): Promise<void> {
    while (this.working) await this.working;
  }

  /**
   * Takes no more jobs, cancels the build under way (which leaves an INVALID index, built again
   * later) rather than wait for it, and waits for its job to end.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.pending.clear();
    if (this.backend !== undefined) {
      await query(this.deps.em.fork(), "select pg_cancel_backend($1)", [this.backend]);
    }
    await this.idle();
  }

  private async work(): Promise<void> {
    for (;;) {
      const next = this.pending.entries().next();
      if (next.done) return;
      const [tableId, job] = next.value;
      this.pending.delete(tableId);
      try {
        await this.runJob(tableId, job);
      } catch (error) {
        this.deps.logger.warn(
          { err: error, tableId: tableId.toString() },
          "looking at a table's field indexes failed",
        );
      }
    }
  }

  private async runJob(tableId: bigint, job: Job): Promise<void> {
    const { organizationId } = job;
    await onOneConnection(this.deps.em, async (run) => {
      const [turn] = await run<{ ok: boolean; backend: number }>(
        "select pg_try_advisory_lock(hashtextextended($1, 0)) as ok, pg_backend_pid() as backend",
        [buildLockKey(tableId)],
      );
      // Another process is building this table's indexes: a later list asks again.
      if (!turn?.ok) return;
      this.backend = turn.backend;
      try {
        await run(
          "select set_config('lock_timeout', $1, false), set_config('statement_timeout', $2, false)",
          [String(this.options.lockTimeoutMs), String(this.options.statementTimeoutMs)],
        );
        const existing = await fieldIndexesOf(run, organizationId, tableId);
        if (existing && (await this.wantsIndexes(run, existing, job, tableId))) {
          await this.build(run, organizationId, tableId, existing, job);
        }
        this.setServed(tableId, existing);
      } finally {
        this.backend = undefined;
        await run("reset lock_timeout");
        await run("reset statement_timeout");
        await run("select pg_advisory_unlock(hashtextextended($1, 0))", [buildLockKey(tableId)]);
      }
    });
  }

  /** Whether an index of the job is missing or invalid, and the table is large enough for one. */
  private async wantsIndexes(
    run: Run,
    existing: Map<string, boolean>,
    job: Job,
    tableId: bigint,
  ): Promise<boolean> {
    if ([...job.keys.keys()].every((text) => existing.get(text) === true)) return false;
    const [count] = await run<{ n: string }>(
      "select coalesce(sum(delta), 0)::text as n from record_count where table_id = $1",
      [tableId],
    );
    return BigInt(count?.n ?? 0) >= BigInt(this.options.minRecords);
  }

  /**
   * Builds the job's indexes, first come, while the table has fewer than the cap (an INVALID
   * leftover, of a build that failed or was cancelled, keeps its place: it is dropped and built
   * again). The fields are read from catalog just before, and again after, so that a field
   * changed meanwhile (to a long text, say) does not keep an index it must not have.
   */
  private async build(
    run: Run,
    organizationId: bigint,
    tableId: bigint,
    existing: Map<string, boolean>,
    job: Job,
  ): Promise<void> {
    const now = Date.now();
    const keys = [...job.keys].filter(
      ([text]) =>
        existing.get(text) !== true &&
        (this.failedUntil.get(failureKey(tableId, text)) ?? 0) <= now,
    );
    if (keys.length === 0) return;
    const schema = await this.deps.schemaOf(tableId);
    if (!schema) return;
    const built: { key: IndexKey; fields: readonly StoredField[] }[] = [];
    for (const [text, key] of keys) {
      const invalid = existing.get(text) === false;
      if (!invalid && existing.size >= this.options.maxFieldIndexes) continue;
      const fields = fieldsOf(schema, key);
      if (invalid) {
        await run(dropFieldIndexConcurrentlySql(organizationId, tableId, key));
        existing.delete(text);
      }
      const sql = fields && createFieldIndexSql(organizationId, tableId, fields);
      if (!fields || !sql) continue;
      try {
        await run(sql);
        existing.set(text, true);
        built.push({ key, fields });
      } catch (error) {
        // What is left is INVALID: the index keeps its place, and is built again later; soon
        // when a schema change cancelled the build (`cancelIndexBuildsSql`).
        existing.set(text, false);
        const wait = cancelledForChange(error) ? this.options.recheckMs : this.options.retryMs;
        this.failedUntil.set(failureKey(tableId, text), Date.now() + wait);
        this.deps.logger.warn(
          { err: error, tableId: tableId.toString(), fields: text },
          "building a field index failed",
        );
      }
    }
    if (built.length === 0) return;
    const after = await this.deps.schemaOf(tableId);
    for (const { key, fields } of built) {
      const current = after && fieldsOf(after, key);
      const same = current?.every(
        (field, i) => fieldIndexExpression(field) === fieldIndexExpression(fields[i]!),
      );
      if (same) continue;
      await run(dropFieldIndexConcurrentlySql(organizationId, tableId, key));
      existing.delete(keyText(key));
    }
  }

  private setServed(tableId: bigint, existing: Map<string, boolean> | undefined): void {
    const state = this.tables.get(tableId);
    if (!state) return;
    state.served = new Set(
      [...(existing ?? new Map<string, boolean>())].filter(([, valid]) => valid).map(([id]) => id),
    );
  }
}

/** Whether a build was cancelled by another session (a schema change), not by its timeout. */
function cancelledForChange(error: unknown): boolean {
  return (
    hasSqlState(error, "57014") &&
    error instanceof Error &&
    !error.message.includes("statement timeout")
  );
}

function storedField(field: TableSchema["fields"][number]): StoredField {
  return { id: BigInt(field.id), type: field.type, options: field.options };
}

/** The key's fields as the schema has them, or undefined when one is no longer there. */
function fieldsOf(
  schema: TableSchema,
  key: IndexKey,
): readonly [StoredField] | readonly [StoredField, StoredField] | undefined {
  const fields = key.map((id) => schema.fields.find((f) => f.id === id));
  if (fields.some((field) => field === undefined)) return undefined;
  return fields.map((field) => storedField(field!)) as [StoredField] | [StoredField, StoredField];
}

function failureKey(tableId: bigint, key: string): string {
  return `${tableId}:${key}`;
}

/** The advisory lock a table's index builds take in turn, across records processes. */
function buildLockKey(tableId: bigint): string {
  return `records.table-indexes:${idText(tableId, "table id")}`;
}

/**
 * The table's field indexes from PostgreSQL's catalog, by `keyText` (read back from their names,
 * `fieldIndex`), valid or not (a build that failed, or one under way); undefined when the table
 * has no user table.
 */
async function fieldIndexesOf(
  run: Run,
  organizationId: bigint,
  tableId: bigint,
): Promise<Map<string, boolean> | undefined> {
  const [table] = await run<{ oid: string | null }>("select to_regclass($1)::oid::text as oid", [
    userTable(organizationId, tableId),
  ]);
  if (!table?.oid) return undefined;
  const rows = await run<{ name: string; valid: boolean }>(
    `select c.relname as name, i.indisvalid as valid
     from pg_index i join pg_class c on c.oid = i.indexrelid
     where i.indrelid = $1::oid`,
    [table.oid],
  );
  const indexes = new Map<string, boolean>();
  for (const row of rows) {
    const key = fieldIndexKeyOf(tableId, row.name);
    if (key !== undefined) indexes.set(key, row.valid);
  }
  return indexes;
}

/** The `keyText` of a field index named `name` (`fieldIndex`), or undefined for another index. */
export function fieldIndexKeyOf(tableId: bigint, name: string): string | undefined {
  const prefix = fieldIndex(tableId, 1n).slice(0, -1);
  const ids = name.startsWith(prefix) ? name.slice(prefix.length) : "";
  return /^[0-9]{1,19}(_f[0-9]{1,19})?$/.test(ids) ? ids.replace("_f", ",") : undefined;
}

/**
 * Runs `work` on one connection of the pool, outside any transaction (`CREATE INDEX
 * CONCURRENTLY` cannot run in one), so that session settings and an advisory lock hold for its
 * statements. `work` undoes its session settings before it returns.
 */
async function onOneConnection<T>(em: EntityManager, work: (run: Run) => Promise<T>): Promise<T> {
  return em
    .fork()
    .getKysely()
    .connection()
    .execute((db) => work((sql, params = []) => rawQuery(db, sql, params)));
}

type CompiledQuery = Parameters<Kysely<unknown>["executeQuery"]>[0];

/** What `rawQuery` needs of a Kysely. */
interface Executor {
  executeQuery(query: CompiledQuery): Promise<{ rows: unknown[] }>;
}

/** One statement with `$n` placeholders on a Kysely bound to a connection (as kit's `query`). */
async function rawQuery<R extends object>(
  db: Executor,
  sql: string,
  params: readonly unknown[],
): Promise<R[]> {
  const compiled = {
    sql,
    parameters: params,
    query: { kind: "RawNode", sqlFragments: [sql], parameters: [] },
    queryId: { queryId: crypto.randomUUID() },
  } as unknown as CompiledQuery;
  const result = await db.executeQuery(compiled);
  return result.rows as R[];
}
