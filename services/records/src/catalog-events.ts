import { fromBinary } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import { type BusMessage, type EventBus, type Logger, SUBJECTS } from "@rowbase/kit";
import { fieldLikeOf } from "@rowbase/kit/field-types";
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
import type { CallContext, Transactions } from "./change-set.js";
import {
  deleteTablesRecords,
  forgetOldEvents,
  lockTableExclusive,
  markProcessed,
  numberExistingRecords,
} from "./db/record-store.js";
import { query } from "./db/sql.js";
import type { TableSchemas } from "./table-schema.js";
import type { TypeChanges } from "./type-changes.js";

const SYSTEM: CallContext = { principal: undefined, requestId: "" };

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
 * go, a type change converts them, a choice rename renames them, a new autonumber field numbers
 * the records that exist. Each change is applied once: the event id is stored with it, so a
 * redelivery or a replay finds it done. The message is acknowledged after the commit.
 */
export class CatalogEvents {
  constructor(
    private readonly deps: {
      tx: Transactions;
      schemas: TableSchemas;
      typeChanges: TypeChanges;
      logger: Logger;
    },
  ) {}

  async listen(bus: EventBus): Promise<{ stop(): Promise<void> }> {
    await forgetOldEvents(this.deps.tx.em());
    return bus.consume(
      { stream: "CATALOG", durable: CATALOG_CONSUMER, subject: SUBJECTS.catalogAny },
      (message) => this.handle(message),
    );
  }

  async handle(message: BusMessage): Promise<void> {
    const tables = tablesNamed(message);
    // Before and after: a reader that refilled the cache meanwhile could hold the old schema.
    await this.deps.schemas.evict(...tables);
    switch (message.subject) {
      case SUBJECTS.tableDeleted:
      case SUBJECTS.databaseDeleted:
        await this.deleteTables(message.id, tables);
        break;
      case SUBJECTS.fieldDeleted: {
        const event = fromBinary(FieldDeletedSchema, message.data);
        await this.once(message.id, async (em) => {
          await query(
            em,
            "update record set data = data - $2::text where table_id = $1 and data ? $2::text",
            [event.tableId, event.fieldId.toString()],
          );
          await query(em, "delete from autonumber_counter where table_id = $1 and field_id = $2", [
            event.tableId,
            event.fieldId,
          ]);
        });
        break;
      }
      case SUBJECTS.fieldCreated: {
        const event = fromBinary(FieldCreatedSchema, message.data);
        if (event.type === FieldType.AUTONUMBER) {
          await this.once(message.id, async (em) => {
            await numberExistingRecords(em, event.tableId, event.fieldId.toString());
          });
        }
        break;
      }
      case SUBJECTS.fieldTypeChanged: {
        const event = fromBinary(FieldTypeChangedSchema, message.data);
        const from = fieldLikeOf({ type: event.oldType, options: event.oldOptions });
        const to = fieldLikeOf({ type: event.newType, options: event.newOptions });
        if (!from || !to) {
          this.deps.logger.warn({ event: message.id }, "type change of an unknown type ignored");
          break;
        }
        const converted = await this.deps.typeChanges.apply(CATALOG_CONSUMER, message.id, {
          tableId: event.tableId,
          fieldId: event.fieldId,
          from,
          to,
        });
        this.deps.logger.info(
          { table_id: event.tableId.toString(), field_id: event.fieldId.toString(), converted },
          "field type changed: values converted",
        );
        break;
      }
      case SUBJECTS.fieldChoicesRenamed: {
        const event = fromBinary(ChoicesRenamedSchema, message.data);
        await this.once(message.id, (em) =>
          renameChoices(
            em,
            event.tableId,
            event.fieldId.toString(),
            event.renames.map((r) => [r.oldName, r.newName]),
          ),
        );
        break;
      }
    }
    await this.deps.schemas.evict(...tables);
  }

  /** Applies an event's change in one transaction, unless it was applied before. */
  private async once(eventId: string, work: (em: EntityManager) => Promise<void>): Promise<void> {
    await this.deps.tx.run(SYSTEM, async ({ em }) => {
      if (await markProcessed(em, CATALOG_CONSUMER, eventId)) await work(em);
    });
  }

  /**
   * Deletes the records of deleted tables and marks the tables gone, under each table's lock, so
   * that a create that raced the deletion is either deleted here or refused.
   */
  private async deleteTables(eventId: string, tableIds: readonly bigint[]): Promise<void> {
    const sorted = [...tableIds].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    await this.once(eventId, async (em) => {
      for (const tableId of sorted) await lockTableExclusive(em, tableId);
      await query(
        em,
        `insert into deleted_table (table_id) select unnest($1::bigint[]) on conflict do nothing`,
        [sorted],
      );
      const deleted = await deleteTablesRecords(em, sorted);
      this.deps.logger.info(
        { tables: sorted.map(String), records: deleted, event: eventId },
        "tables deleted: records removed",
      );
    });
  }
}

/**
 * Renames stored select values, all pairs at once so that swapping two names works: a single
 * select's string and the items of a multi select's array. Select values are stored in their
 * choice's own spelling, so names match exactly.
 */
export async function renameChoices(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  renames: readonly [string, string][],
): Promise<void> {
  if (renames.length === 0) return;
  const olds = renames.map(([old]) => old);
  const news = renames.map(([, renamed]) => renamed);
  await query(
    em,
    `update record r set data = jsonb_set(r.data, array[$2::text], to_jsonb(m.new_name))
     from unnest($3::text[], $4::text[]) as m(old_name, new_name)
     where r.table_id = $1 and jsonb_typeof(r.data -> $2::text) = 'string'
       and r.data ->> $2::text = m.old_name`,
    [tableId, fieldId, olds, news],
  );
  await query(
    em,
    `update record r set data = jsonb_set(r.data, array[$2::text], (
       select coalesce(jsonb_agg(to_jsonb(coalesce(m.new_name, item.name)) order by item.n), '[]'::jsonb)
       from jsonb_array_elements_text(r.data -> $2::text) with ordinality as item(name, n)
       left join unnest($3::text[], $4::text[]) as m(old_name, new_name) on m.old_name = item.name
     ))
     where r.table_id = $1 and jsonb_typeof(r.data -> $2::text) = 'array'
       and (r.data -> $2::text) ?| $3::text[]`,
    [tableId, fieldId, olds, news],
  );
}
