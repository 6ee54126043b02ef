import { fromBinary } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type AfterCommit,
  applyOnce,
  type BusMessage,
  consumeOnce,
  type EventBus,
  type Logger,
  type Orm,
  query,
  SUBJECTS,
  validationFailed,
} from "@rowbase/kit";
import {
  type FieldLike,
  fieldLikeOf,
  isRelationalType,
  linkOptionsOf,
} from "@rowbase/kit/field-types";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import {
  ChoicesRenamedSchema,
  DatabaseDeletedSchema,
  FieldCreatedSchema,
  FieldDeletedSchema,
  FieldTypeChangedSchema,
  FieldUpdatedSchema,
  TableCreatedSchema,
  TableDeletedSchema,
  TableUpdatedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { numberReserved, reserveAutonumbers } from "./db/autonumbers.js";
import { lockTableExclusive } from "./db/create-gate.js";
import {
  type ChoiceRename,
  clearTypeChangePending,
  deleteRecordsInChunks,
  deleteTablesRecords,
  lastRowId,
  markFieldDeleted,
  markTablesDeleted,
  notProcessed,
  renameChoicesInChunks,
  renameChoicesOf,
  renamesRepeatable,
  sweepDeletedField,
} from "./db/schema-changes.js";
import type { StoredTables } from "./db/user-tables/registry.js";
import {
  addUserTableField,
  changeUserTableField,
  confirmFieldChange,
  createLinkJunction,
  createUserTable,
  dropLinkJunction,
  dropUserTableField,
  dropUserTables,
} from "./db/user-tables/schema-changes.js";
import type { TableSchemas } from "./table-schema.js";
import type { TypeChange, TypeChanges } from "./type-changes.js";

/** The durable consumer, also the consumer's name in `processed_event`. */
export const CATALOG_CONSUMER = "records_catalog";

/** The tables a catalog event names, whatever its subject. */
function tablesNamed(message: BusMessage): bigint[] {
  switch (message.subject) {
    case SUBJECTS.databaseDeleted:
      return fromBinary(DatabaseDeletedSchema, message.data).tableIds;
    case SUBJECTS.tableCreated:
      return [fromBinary(TableCreatedSchema, message.data).tableId];
    case SUBJECTS.tableUpdated:
      return [fromBinary(TableUpdatedSchema, message.data).tableId];
    case SUBJECTS.tableDeleted:
      return [fromBinary(TableDeletedSchema, message.data).tableId];
    case SUBJECTS.fieldCreated:
    case SUBJECTS.fieldUpdated:
    case SUBJECTS.fieldDeleted:
    case SUBJECTS.fieldTypeChanged:
    case SUBJECTS.fieldChoicesRenamed:
      // Every field event starts with meta, organization_id, database_id, table_id, field_id.
      return [fromBinary(FieldUpdatedSchema, message.data).tableId];
    default:
      return [];
  }
}

/**
 * Records' part of catalog's changes (CATALOG stream, durable `records_catalog`): every event
 * evicts the cached schemas of the tables it names; deleted tables and databases take their
 * records with them (and give the organization's record count back); a deleted field's values
 * go (and it is marked deleted for writes of an older schema), a type change converts them, a
 * select's changed choices rename them (and end the change's pending check), a new autonumber
 * field numbers the records that exist. Each event is applied once (`consumeOnce`): its id is
 * recorded in `processed_event` in the transaction that applies it, so a redelivery or a replay
 * finds it done. What rewrites many records does most of it before that transaction, a chunk
 * at a time (`prepare`); the transaction does the rest under the table's lock. The message is
 * acknowledged after the commit.
 */
export class CatalogEvents {
  /** Where the last chunk of a type change starts, by event id, between the two phases. */
  private readonly pendingTypeChanges = new Map<string, { after: string; converted: number }>();
  /** Up to which record a choice rename's chunks renamed, by event id, between the two phases. */
  private readonly renamedUpTo = new Map<string, string>();

  constructor(
    private readonly deps: {
      orm: Orm;
      schemas: TableSchemas;
      typeChanges: TypeChanges;
      tables: StoredTables;
      logger: Logger;
    },
  ) {}

  listen(bus: EventBus): Promise<{ stop(): Promise<void> }> {
    return consumeOnce(
      this.deps.orm,
      bus,
      { stream: "CATALOG", durable: CATALOG_CONSUMER, subject: SUBJECTS.catalogAny },
      (em, message) => this.apply(em, message),
      { logger: this.deps.logger, beforeTransaction: (message) => this.prepare(message) },
    );
  }

  /** One delivery, as the consumer handles it; whether it was applied (tests replay with it). */
  async handle(message: BusMessage): Promise<boolean> {
    await this.prepare(message);
    return applyOnce(this.deps.orm, CATALOG_CONSUMER, message, (em) => this.apply(em, message));
  }

  /**
   * Before the transaction: evicts the named tables' schemas, then rewrites records a chunk at a
   * time (each chunk idempotent, committed on its own): a deleted field's values, a new
   * autonumber field's numbers, a type change's values up to its last chunk, renamed choices.
   */
  async prepare(message: BusMessage): Promise<void> {
    this.pendingTypeChanges.delete(message.id);
    this.renamedUpTo.delete(message.id);
    await this.deps.schemas.evict(...tablesNamed(message));
    if (await this.applyToUserTables(message)) return;
    // Without `record`, a table not registered has nothing stored (it does not exist).
    if (await this.deps.tables.recordGone()) return;
    if (message.subject === SUBJECTS.fieldDeleted) return this.dropDeletedField(message);
    if (message.subject === SUBJECTS.fieldCreated) return this.numberExistingRecords(message);
    if (message.subject === SUBJECTS.fieldChoicesRenamed) return this.renameInChunks(message);
    if (message.subject === SUBJECTS.tableDeleted || message.subject === SUBJECTS.databaseDeleted) {
      return this.deleteRecords(message);
    }
    if (message.subject !== SUBJECTS.fieldTypeChanged) return;
    const change = typeChangeOf(message);
    if (!change) return;
    const done = await this.deps.typeChanges.applyAllButLast(CATALOG_CONSUMER, message.id, change);
    this.pendingTypeChanges.set(message.id, done);
  }

  /**
   * The event's change of a table stored in its user table (every new table), applied to it at
   * once (each is the state to reach, so applied twice it ends the same); whether it was such a
   * change. A deleted database's user tables are dropped here, its tables still stored in
   * `record` lose their records as before.
   */
  private async applyToUserTables(message: BusMessage): Promise<boolean> {
    const em = this.deps.orm.em.fork();
    switch (message.subject) {
      case SUBJECTS.tableCreated: {
        const event = fromBinary(TableCreatedSchema, message.data);
        await createUserTable(em, event);
        return true;
      }
      case SUBJECTS.tableDeleted:
      case SUBJECTS.databaseDeleted:
        await dropUserTables(em, tablesNamed(message));
        return false;
      case SUBJECTS.fieldCreated: {
        const event = fromBinary(FieldCreatedSchema, message.data);
        const type = fieldLikeOf({ type: event.type });
        if (type?.type === "link") {
          await this.createJunction(em, event, { type: "link", options: event.options ?? {} });
          return true;
        }
        if (!type || !(await this.deps.tables.inUserTable(event.tableId))) return false;
        await addUserTableField(em, event, { id: event.fieldId, ...type });
        return true;
      }
      case SUBJECTS.fieldDeleted: {
        const event = fromBinary(FieldDeletedSchema, message.data);
        const inverseFieldId =
          fieldLikeOf({ type: event.type })?.type === "link"
            ? linkOptionsOf(event.options)?.inverseFieldId
            : undefined;
        // A link's junction lives in the organization's schema, whatever stores its tables.
        if (inverseFieldId !== undefined) {
          await dropLinkJunction(em, event.organizationId, event.fieldId, inverseFieldId);
        }
        if (!(await this.deps.tables.inUserTable(event.tableId))) return false;
        await dropUserTableField(em, event, event.fieldId);
        return true;
      }
      case SUBJECTS.fieldTypeChanged: {
        const change = typeChangeOf(message);
        if (!change || !(await this.deps.tables.inUserTable(change.scope.tableId))) return false;
        // A link, lookup or rollup has no column: a change of its options converts nothing
        // (the check refused a link made single while a record held more).
        if (isRelationalType(change.from.type) || isRelationalType(change.to.type)) return true;
        // Converted by the check catalog asked for before it committed (CheckFieldTypeChange):
        // the values from before it go. Without such a check, converted now.
        const table = change.scope;
        const confirmed =
          change.changeId !== "" &&
          (await confirmFieldChange(em, table, change.fieldId, change.changeId));
        const { refused } = confirmed
          ? {}
          : await changeUserTableField(em, table, {
              from: { id: change.fieldId, ...change.from },
              to: { id: change.fieldId, ...change.to },
              required: "none",
            });
        if (change.from.type === "autonumber" && change.to.type !== "autonumber") {
          await retireCounter(em, change.scope.tableId, change.fieldId);
        }
        if (refused) {
          this.deps.logger.error(
            { table_id: change.scope.tableId.toString(), field_id: change.fieldId.toString() },
            `committed type change does not convert: ${refused.message}`,
          );
        }
        return true;
      }
      case SUBJECTS.fieldChoicesRenamed: {
        const event = fromBinary(ChoicesRenamedSchema, message.data);
        const field = fieldLikeOf({ type: event.type, options: event.options });
        if (!field || !(await this.deps.tables.inUserTable(event.tableId))) return false;
        // Choices are stored by id: a rename needs nothing; a removed choice's values go.
        await changeUserTableField(em, event, {
          from: { id: event.fieldId, ...field },
          to: { id: event.fieldId, ...field },
          required: "none",
        });
        return true;
      }
      default:
        return false;
    }
  }

  /**
   * A new link field's junction (`createLinkJunction`, once for the pair). Both tables must be
   * stored in their user tables, whose rows the junction references: a table still stored in
   * `record` (the upgrade has not moved it yet) cannot hold links, and the link is refused with
   * a 400 on its type, which rolls catalog's change back. So is a link whose event names no
   * inverse field or linked table (catalog names both).
   */
  private async createJunction(
    em: EntityManager,
    event: { organizationId: bigint; tableId: bigint; fieldId: bigint },
    field: FieldLike,
  ): Promise<void> {
    const options = linkOptionsOf(field.options);
    const refuse = (message: string) =>
      validationFailed([{ key: "type", message, source: "body", code: "invalid_value" }]);
    if (!options?.inverseFieldId) {
      throw refuse(
        "a link needs its linked table and inverse field (options.table_id, inverse_field_id)",
      );
    }
    for (const tableId of new Set([event.tableId, options.tableId])) {
      const stored = await this.deps.tables.userTableOf(tableId);
      // Without `record`, a table not registered is one catalog deleted since: nothing to link.
      if (!stored && (await this.deps.tables.recordGone())) return;
      if (!stored || stored.organizationId !== event.organizationId) {
        throw refuse(
          `table ${tableId} cannot hold links yet: its records are still being moved to the new storage; try again later`,
        );
      }
    }
    await createLinkJunction(em, event.organizationId, {
      id: event.fieldId,
      tableId: event.tableId,
      inverseFieldId: options.inverseFieldId,
      linkedTableId: options.tableId,
    });
  }

  /** Whether the event changes a table stored in its user table (`applyToUserTables` did it). */
  private async storedInUserTable(message: BusMessage): Promise<boolean> {
    if (message.subject === SUBJECTS.tableCreated) return true;
    if (!message.subject.startsWith("catalog.field.")) return false;
    const [tableId] = tablesNamed(message);
    return tableId !== undefined && this.deps.tables.inUserTable(tableId);
  }

  /** Applies the event in the consumer's transaction `em`; the eviction follows the commit. */
  async apply(em: EntityManager, message: BusMessage): Promise<AfterCommit> {
    const tables = tablesNamed(message);
    if (await this.storedInUserTable(message)) return () => this.deps.schemas.evict(...tables);
    const deletion =
      message.subject === SUBJECTS.tableDeleted || message.subject === SUBJECTS.databaseDeleted;
    // Without `record`, a table not registered has nothing stored but its marks and counts,
    // which a deletion removes.
    if (!deletion && (await this.deps.tables.recordGone())) {
      return () => this.deps.schemas.evict(...tables);
    }
    switch (message.subject) {
      case SUBJECTS.tableDeleted:
      case SUBJECTS.databaseDeleted:
        await this.deleteTables(em, message.id, tables);
        break;
      case SUBJECTS.fieldDeleted: {
        // The field is marked and its values dropped before the transaction (`prepare`).
        const event = fromBinary(FieldDeletedSchema, message.data);
        await retireCounter(em, event.tableId, event.fieldId);
        break;
      }
      case SUBJECTS.fieldTypeChanged: {
        const change = typeChangeOf(message);
        if (!change) {
          this.deps.logger.warn({ event: message.id }, "type change of an unknown type ignored");
          break;
        }
        const before = this.pendingTypeChanges.get(message.id) ?? { after: "0", converted: 0 };
        this.pendingTypeChanges.delete(message.id);
        // A write under way (past its gate, its value checked against the pending change) may
        // create a record the last chunk would not see: it commits first, and is converted here;
        // every later one finds the change no longer pending.
        await lockTableExclusive(em, change.scope.tableId);
        let converted =
          before.converted + (await this.deps.typeChanges.applyLast(em, change, before.after));
        // Converted: the change is no longer pending, and writes need not convert to it.
        const noted = await clearTypeChangePending(
          em,
          {
            tableId: change.scope.tableId,
            fieldId: change.fieldId,
            toType: change.to.type,
            toOptions: change.to.options,
          },
          change.changeId,
        );
        // Writes checked against it that landed in a chunk converted before them (the last
        // chunk's were just converted).
        const passed = noted.writes
          .map((write) => write.rowId)
          .filter((rowId) => BigInt(rowId) <= BigInt(before.after));
        converted += await this.deps.typeChanges.applyNoted(em, change, passed);
        if (change.from.type === "autonumber" && change.to.type !== "autonumber") {
          await retireCounter(em, change.scope.tableId, change.fieldId);
        }
        this.deps.logger.info(
          {
            table_id: change.scope.tableId.toString(),
            field_id: change.fieldId.toString(),
            converted,
          },
          "field type changed: values converted",
        );
        break;
      }
      case SUBJECTS.fieldChoicesRenamed: {
        const event = fromBinary(ChoicesRenamedSchema, message.data);
        const upTo = this.renamedUpTo.get(message.id) ?? "0";
        this.renamedUpTo.delete(message.id);
        // A write under way (past its gate, so held to the new choices) commits first, and its
        // value is renamed here; every later one finds the change no longer pending. The
        // records the chunks passed are renamed again only when a write noted them; those a
        // write of the new choices (catalog committed them) wrote last are not renamed at all,
        // nor those written once the change was no longer pending (the event came late).
        await lockTableExclusive(em, event.tableId);
        const to = fieldLikeOf({ type: event.type, options: event.options });
        const cleared = to
          ? await clearTypeChangePending(
              em,
              {
                tableId: event.tableId,
                fieldId: event.fieldId,
                toType: to.type,
                toOptions: to.options,
              },
              event.changeId,
            )
          : undefined;
        await renameChoicesOf(
          em,
          event.tableId,
          event.fieldId.toString(),
          renamesOf(event),
          upTo,
          cleared,
        );
        break;
      }
    }
    // After the commit too: a reader that refilled the cache meanwhile could hold the old schema.
    return () => this.deps.schemas.evict(...tables);
  }

  /**
   * Marks a deleted field deleted (its own transaction, under the table's lock), then drops its
   * values a chunk per statement, without the lock (`sweepDeletedField`). Again on a redelivery
   * that was not applied (each step is idempotent); not once it was.
   */
  private async dropDeletedField(message: BusMessage): Promise<void> {
    const em = this.deps.orm.em.fork();
    if (!(await notProcessed(em, CATALOG_CONSUMER, message.id))) return;
    const { tableId, fieldId } = fromBinary(FieldDeletedSchema, message.data);
    await em.transactional((tx) => markFieldDeleted(tx, tableId, fieldId));
    const swept = await sweepDeletedField(em, tableId, fieldId);
    this.deps.logger.info(
      { table_id: tableId.toString(), field_id: fieldId.toString(), swept, event: message.id },
      "field deleted: values dropped",
    );
  }

  /**
   * Renames a select's stored choices up to the table's last record a chunk per statement,
   * without the table's lock (`renameChoicesInChunks`), when the renames can be applied twice
   * (`renamesRepeatable`); the consumer's transaction renames the rest. A swap or a chain of
   * names is left to that transaction whole. Again on a redelivery that was not applied (a
   * repeat renames nothing twice); not once it was (a later change may have renamed back).
   */
  private async renameInChunks(message: BusMessage): Promise<void> {
    const event = fromBinary(ChoicesRenamedSchema, message.data);
    const renames = renamesOf(event);
    if (renames.length === 0 || !renamesRepeatable(renames)) return;
    const em = this.deps.orm.em.fork();
    if (!(await notProcessed(em, CATALOG_CONSUMER, message.id))) return;
    const upTo = await lastRowId(em, event.tableId);
    const renamed = await renameChoicesInChunks(
      em,
      event.tableId,
      event.fieldId.toString(),
      renames,
      upTo,
    );
    this.renamedUpTo.set(message.id, upTo);
    this.deps.logger.info(
      { table_id: event.tableId.toString(), field_id: event.fieldId.toString(), renamed },
      "choices renamed: records up to the last renamed in chunks",
    );
  }

  /**
   * Numbers the records that exist when an autonumber field is added, in creation order: the
   * numbers are reserved in a transaction of their own, under the table's lock, then given out
   * a chunk per statement without it (`reserveAutonumbers`, `numberReserved`). Again on a
   * redelivery that was not applied (a repeat numbers the records still without a number).
   */
  private async numberExistingRecords(message: BusMessage): Promise<void> {
    const event = fromBinary(FieldCreatedSchema, message.data);
    if (event.type !== FieldType.AUTONUMBER) return;
    const em = this.deps.orm.em.fork();
    if (!(await notProcessed(em, CATALOG_CONSUMER, message.id))) return;
    const fieldId = event.fieldId.toString();
    const reservation = await em.transactional((tx) =>
      reserveAutonumbers(tx, event.tableId, fieldId),
    );
    const numbered = await numberReserved(em, event.tableId, fieldId, reservation);
    this.deps.logger.info(
      { table_id: event.tableId.toString(), field_id: fieldId, numbered, event: message.id },
      "autonumber field added: records numbered",
    );
  }

  /**
   * Marks deleted tables deleted (a transaction of its own, under their locks), then deletes
   * their records a chunk per statement (`deleteRecordsInChunks`). Again on a redelivery that
   * was not applied; not once it was.
   */
  private async deleteRecords(message: BusMessage): Promise<void> {
    const tableIds = tablesNamed(message);
    const em = this.deps.orm.em.fork();
    if (tableIds.length === 0 || !(await notProcessed(em, CATALOG_CONSUMER, message.id))) return;
    await em.transactional((tx) => markTablesDeleted(tx, tableIds));
    let deleted = 0;
    for (const tableId of tableIds) deleted += await deleteRecordsInChunks(em, tableId);
    this.deps.logger.info(
      { tables: tableIds.map(String), records: deleted, event: message.id },
      "tables deleted: records removed",
    );
  }

  /**
   * Marks deleted tables gone and deletes what is left of their records (all of them when the
   * chunks did not run), under each table's lock, so that a create that raced the deletion is
   * either deleted here or refused; their counters and marks go too.
   */
  private async deleteTables(
    em: EntityManager,
    eventId: string,
    tableIds: readonly bigint[],
  ): Promise<void> {
    await markTablesDeleted(em, tableIds);
    const deleted = await deleteTablesRecords(em, tableIds);
    if (deleted > 0) {
      this.deps.logger.info(
        { tables: tableIds.map(String), records: deleted, event: eventId },
        "tables deleted: records removed",
      );
    }
  }
}

/** A FieldTypeChanged event's change; undefined when a type is unknown. */
function typeChangeOf(message: BusMessage): TypeChange | undefined {
  const event = fromBinary(FieldTypeChangedSchema, message.data);
  const from = fieldLikeOf({ type: event.oldType, options: event.oldOptions });
  const to = fieldLikeOf({ type: event.newType, options: event.newOptions });
  if (!from || !to) return undefined;
  return {
    scope: {
      organizationId: event.organizationId,
      databaseId: event.databaseId,
      tableId: event.tableId,
    },
    fieldId: event.fieldId,
    fieldName: event.fieldName,
    from,
    to,
    requestId: event.meta?.requestId ?? "",
    changeId: event.changeId,
  };
}

/** A ChoicesRenamed event's renames, old name to new. */
function renamesOf(event: { renames: { oldName: string; newName: string }[] }): ChoiceRename[] {
  return event.renames.map((rename) => [rename.oldName, rename.newName]);
}

/**
 * Marks the counter of a field that numbers no more (deleted, or changed to another type): a
 * create's gate then no longer expects the field in the create's schema (else it answered
 * `stale` to every create of the table for good), and a create whose schema still has the
 * field cannot start the counter again. Kept rather than deleted for that.
 */
async function retireCounter(em: EntityManager, tableId: bigint, fieldId: bigint): Promise<void> {
  await query(
    em,
    "update autonumber_counter set deleted = true where table_id = $1 and field_id = $2",
    [tableId, fieldId],
  );
}
