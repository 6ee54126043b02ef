import type { JsonObject } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type Call,
  Code,
  domainError,
  type Logger,
  type Orm,
  query,
  type ValidationItem,
  type ValidationSource,
  validationFailed,
} from "@rowbase/kit";
import {
  ChangeActorSchema,
  ChangeType,
  type RecordChange,
  RecordChangeSchema,
} from "@rowbase/proto/rowbase/records/v1/records_pb";
import type { Access } from "./access.js";
import { queryFieldsOf } from "./domain/query-fields.js";
import {
  type OutputOptions,
  outputData,
  renderTexts,
  type StoredRecord,
} from "./domain/record-output.js";
import { buildWhere, QueryError } from "./query/index.js";
import { selectedFields, type TableRef } from "./records.js";
import type { SchemaField } from "./table-schema.js";
import { toRecord } from "./wire.js";

/** Changes per page: 100 unless asked, at most 1000. */
export const CHANGES_LIMIT_DEFAULT = 100;
export const CHANGES_LIMIT_MAX = 1000;

/** Writes one sequencing gives positions to (each its block); more wait for the next round. */
const SEQUENCE_BATCH = 10_000;

export type ChangeTypeName = "created" | "updated" | "deleted";

const TYPE_NAMES = new Map<ChangeType, ChangeTypeName>([
  [ChangeType.CREATED, "created"],
  [ChangeType.UPDATED, "updated"],
  [ChangeType.DELETED, "deleted"],
]);
const TYPE_VALUES = new Map<string, ChangeType>(
  [...TYPE_NAMES].map(([value, name]) => [name, value]),
);

/**
 * A place in a table's change log: the table, and the position of the last change read (0:
 * before every change). Written as an opaque text, so that clients do not build their own.
 */
export interface Cursor {
  tableId: bigint;
  position: bigint;
}

export function cursorText(cursor: Cursor): string {
  return Buffer.from(`${cursor.tableId}:${cursor.position}`).toString("base64url");
}

/** The cursor a text names, or undefined when it is not one. */
export function parseCursor(text: string): Cursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,60}$/.test(text)) return undefined;
  const match = /^([1-9][0-9]{0,18}):(0|[1-9][0-9]{0,18})$/.exec(
    Buffer.from(text, "base64url").toString("latin1"),
  );
  if (!match) return undefined;
  return { tableId: BigInt(match[1]!), position: BigInt(match[2]!) };
}

/**
 * Gives committed changes their positions (sql/record_change_sequence.sql), soon after each
 * write: `kick` after a commit that wrote changes, and a round every `intervalMs` for changes
 * whose writer went away before kicking. Kicks while a round runs make one more round.
 */
export class ChangeSequencer {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private again = false;
  private stopped = false;

  constructor(
    private readonly orm: Orm,
    private readonly logger: Logger,
    private readonly intervalMs = 250,
  ) {}

  start(): void {
    this.stopped = false;
    this.timer = setInterval(() => this.kick(), this.intervalMs);
    this.timer.unref();
    this.kick();
  }

  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.round()
      .catch((error: unknown) => this.logger.warn({ err: error }, "change sequencing failed"))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** One sequencing; answers the last position given (the present end of every log). */
  async round(): Promise<bigint> {
    const [row] = await query<{ last: string }>(
      this.orm.em.fork(),
      "select record_change_sequence($1)::text as last",
      [SEQUENCE_BATCH],
    );
    return BigInt(row!.last);
  }

  /**
   * The present end, once every change committed so far has its position: what a request's
   * `now` is, so that a change whose write had answered before it is behind it.
   */
  async present(): Promise<bigint> {
    let last = await this.round();
    for (;;) {
      const next = await this.round();
      if (next === last) return last;
      last = next;
    }
  }
}

/**
 * Deletes changes sequenced more than `retentionSeconds` ago, every `intervalMs`, noting per
 * table the last position removed (`record_change_trim`), before which a cursor has expired.
 * Positions are given in the order of `sequenced_at`, so what goes is a prefix of each log. A
 * write's changes go together (they were sequenced together): a cursor inside a removed write
 * is before its last position, so it has expired, as the changes after it are gone.
 */
export class ChangeRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(
    private readonly orm: Orm,
    private readonly logger: Logger,
    private readonly retentionSeconds: number,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.purge()
        .catch((error: unknown) => this.logger.warn({ err: error }, "changes not purged"))
        .finally(() => {
          this.running = undefined;
        });
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** Deletes the expired changes; answers how many. */
  async purge(): Promise<number> {
    const [row] = await query<{ removed: string }>(
      this.orm.em.fork(),
      `with gone as (
         delete from record_change_write
         where last_position is not null
           and sequenced_at < clock_timestamp() - $1 * interval '1 second'
         returning table_id, last_position, size
       ), trimmed as (
         insert into record_change_trim (table_id, through)
         select table_id, max(last_position) from gone group by table_id
         on conflict (table_id) do update
           set through = greatest(record_change_trim.through, excluded.through)
       )
       select coalesce(sum(size), 0)::text as removed from gone`,
      [this.retentionSeconds],
    );
    return Number(row?.removed ?? 0);
  }
}

export interface ChangesParams {
  /** A cursor, `now`, or empty (from the oldest change kept). */
  after: string;
  afterSource: ValidationSource;
  limit: number;
  types: readonly ChangeType[];
  where: string;
  fields: string;
  output: OutputOptions;
}

export interface ChangesPage {
  changes: RecordChange[];
  next: string;
  hasMore: boolean;
}

/** A change as the page's statement reads it. */
interface ChangeRow {
  /** A JSON number: positions stay far below 2^53. */
  position: number;
  row_id: string;
  type: ChangeTypeName;
  actor_type: string;
  actor_id: string;
  organization_id: string;
  database_id: string;
  data: JsonObject;
  previous: JsonObject | null;
  changed_fields: string[] | null;
  created_ms: number;
  updated_ms: number;
  at_ms: number;
}

function queryProblem(error: unknown): never {
  if (error instanceof QueryError) throw validationFailed([error.toValidationIssue()]);
  throw error;
}

/**
 * Reads tables' change logs for any caller that may read the table: a page of changes after a
 * cursor, in position order, filtered by type and by `where` on the record (before a deletion),
 * with the record, `previous` and `changed_fields` shown as a list shows records.
 */
export class ChangeLog {
  constructor(
    private readonly deps: {
      orm: Orm;
      access: Access;
      sequencer: ChangeSequencer;
    },
  ) {}

  async list(
    call: Call,
    table: TableRef,
    params: ChangesParams,
    signal: AbortSignal,
  ): Promise<ChangesPage> {
    const schema =
      call.principal.kind === "service"
        ? await this.deps.access.tableForService(call, table.tableId, table.databaseId)
        : (await this.deps.access.table(call, table.tableId, table.databaseId, "read")).schema;
    const problems: ValidationItem[] = [];
    const limit = params.limit === 0 ? CHANGES_LIMIT_DEFAULT : params.limit;
    if (limit < 1 || limit > CHANGES_LIMIT_MAX) {
      problems.push({
        key: "limit",
        message: `must be 1-${CHANGES_LIMIT_MAX}`,
        source: "query",
        code: "out_of_range",
      });
    }
    const afterKey = params.afterSource === "header" ? "Last-Event-ID" : "after";
    const cursor =
      params.after === "" || params.after === "now" ? undefined : parseCursor(params.after);
    const badCursor: ValidationItem = {
      key: afterKey,
      message: "is not a change cursor of this table",
      source: params.afterSource,
      code: "invalid_value",
    };
    if (params.after !== "" && params.after !== "now" && cursor?.tableId !== schema.tableId) {
      problems.push(badCursor);
    }
    const types = params.types.map((type) => TYPE_NAMES.get(type));
    if (types.some((type) => type === undefined)) {
      problems.push({
        key: "types",
        message: "must be record.created, record.updated or record.deleted",
        source: "query",
        code: "invalid_value",
      });
    }
    if (problems.length > 0) throw validationFailed(problems);
    const fields = selectedFields(schema, params.fields);

    if (params.after === "now") {
      const end = await this.deps.sequencer.present();
      return {
        changes: [],
        next: cursorText({ tableId: schema.tableId, position: end }),
        hasMore: false,
      };
    }

    const statementParams: unknown[] = [schema.tableId, cursor?.position ?? 0n, limit + 1];
    let typeFilter = "true";
    if (types.length > 0) {
      statementParams.push(types);
      typeFilter = `r.type = any($${statementParams.length}::text[])`;
    }
    let filter = "true";
    if (params.where !== "") {
      try {
        const compiled = buildWhere(params.where, queryFieldsOf(schema.fields), {
          paramOffset: statementParams.length,
          now: new Date(),
          tableAlias: "r",
          storage: "jsonb",
        });
        filter = compiled.sql;
        statementParams.push(...compiled.params);
      } catch (error) {
        queryProblem(error);
      }
    }
    // One statement, so one snapshot: the present end, the table's trim and the page agree (a
    // sequencing commits its positions and the end together, so every change seen is behind
    // the end seen). The log's order is the writes' (`write_position`, from the index) then
    // each write's own (`ordinal`): PostgreSQL so expands only the writes the page reaches.
    const [read] = await query<{ last: string; through: string; changes: ChangeRow[] }>(
      this.deps.orm.em.fork(),
      `select l.last_position::text as last, coalesce(t.through, 0)::text as through,
         (select coalesce(json_agg(c order by c.position), '[]'::json) from (
            select r.position, r.row_id::text as row_id, r.type,
              r.actor_type, r.actor_id::text as actor_id,
              r.organization_id::text as organization_id, r.database_id::text as database_id,
              r.data, r.previous, r.changed_fields,
              (extract(epoch from r.created_at) * 1000)::float8 as created_ms,
              (extract(epoch from r.updated_at) * 1000)::float8 as updated_ms,
              (extract(epoch from r.at) * 1000)::float8 as at_ms
            from record_change r
            where r.table_id = $1 and r.write_position > $2 and r.position > $2
              and ${typeFilter} and ${filter}
            order by r.write_position, r.ordinal limit $3
         ) c) as changes
       from record_change_log l
       left join record_change_trim t on t.table_id = $1`,
      statementParams,
    );
    const last = BigInt(read!.last);
    if (cursor) {
      if (cursor.position > last) throw validationFailed([badCursor]);
      if (cursor.position < BigInt(read!.through)) throw cursorExpired();
    }
    const rows = read!.changes;
    const hasMore = rows.length > limit;
    const page = rows.slice(0, limit);
    const next = hasMore ? BigInt(page[page.length - 1]!.position) : last;
    return {
      changes: await this.present(schema.tableId, page, fields, params.output, signal),
      next: cursorText({ tableId: schema.tableId, position: next }),
      hasMore,
    };
  }

  /** The changes as the request asks to see them. */
  private async present(
    tableId: bigint,
    rows: readonly ChangeRow[],
    fields: readonly SchemaField[],
    output: OutputOptions,
    signal: AbortSignal,
  ): Promise<RecordChange[]> {
    const shown = rows.map((row) => {
      const record: StoredRecord = {
        rowId: BigInt(row.row_id),
        tableId,
        data: row.data,
        createdAt: new Date(row.created_ms),
        updatedAt: new Date(row.updated_ms),
      };
      const previous: StoredRecord | undefined = row.previous
        ? { ...record, data: row.previous }
        : undefined;
      const previousFields = row.previous
        ? fields.filter((field) => Object.hasOwn(row.previous!, field.id))
        : [];
      return { row, record, previous, previousFields };
    });
    const rendered = await renderTexts(
      shown.flatMap(({ row, record, previous }) => [
        ...(row.type === "deleted" ? [] : [record]),
        ...(previous ? [previous] : []),
      ]),
      fields,
      output.richText,
      signal,
    );
    const options = { ...output, rendered };
    const selected = new Set(fields.map((field) => field.id));
    const nameOf = new Map(fields.map((field) => [field.id, field.name]));
    return shown.map(({ row, record, previous, previousFields }) =>
      create(RecordChangeSchema, {
        changeId: cursorText({ tableId, position: BigInt(row.position) }),
        type: TYPE_VALUES.get(row.type)!,
        at: timestampFromDate(new Date(row.at_ms)),
        organizationId: BigInt(row.organization_id),
        databaseId: BigInt(row.database_id),
        tableId,
        rowId: record.rowId,
        actor: create(ChangeActorSchema, { type: row.actor_type, id: BigInt(row.actor_id) }),
        ...(row.type === "deleted" ? {} : { record: toRecord(record, fields, options) }),
        previousJson: previous ? JSON.stringify(outputData(previous, previousFields, options)) : "",
        changedFields: (row.changed_fields ?? [])
          .filter((id) => selected.has(id))
          .map((id) => (output.keys === "ids" ? id : nameOf.get(id)!)),
      }),
    );
  }
}

/** A cursor before what the log still keeps: the changes after it are gone. */
export function cursorExpired() {
  return domainError(Code.FailedPrecondition, "cursor_expired");
}
