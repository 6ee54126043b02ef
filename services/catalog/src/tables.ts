import {
  type Call,
  changesBetween,
  SUBJECTS,
  type ValidationItem,
  validationFailed,
  valuesRemoved,
  valuesSet,
} from "@rowbase/kit";
import { foldName, MAX_FIELDS_PER_TABLE, type OptionError } from "@rowbase/kit/field-types";
import {
  TableCreatedSchema,
  TableDeletedSchema,
  TableUpdatedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { type Access, notFound, scopeOf } from "./access.js";
import type { Transactions } from "./change-set.js";
import {
  databaseFull,
  FIELD_NAME_KEY,
  TABLE_NAME_KEY,
  tableNameUsed,
  violates,
} from "./db/constraints.js";
import { Field, type FieldRow, Table, type TableRow } from "./db/entities.js";
import { linksInto, lockTables } from "./db/relations.js";
import {
  type CheckedField,
  checkFieldDefinition,
  type FieldInput,
} from "./domain/field-definition.js";
import { checkSchemaBytes, schemaBytesOf } from "./domain/schema-size.js";
import { invalidFieldOptions, requiredDescription, requiredName } from "./domain/validation.js";
import { fieldNameTaken, tableLimitExceeded, tableNameTaken } from "./errors.js";
import { announceFieldCreated } from "./field-events.js";
import { addInverse, checkRelations, deleteWithDependents } from "./relations.js";

/** The most table ids one page of `Tables.ids` answers. */
export const TABLE_IDS_PAGE = 1000;

export interface TableView {
  table: TableRow;
  fields: FieldRow[];
}

/** The initial fields of a new table, all checked before anything is written. */
function checkInitialFields(inputs: FieldInput[]): CheckedField[] {
  if (inputs.length > MAX_FIELDS_PER_TABLE) {
    throw validationFailed([
      {
        key: "fields",
        message: `must have at most ${MAX_FIELDS_PER_TABLE} items`,
        source: "body",
        code: "too_long",
      },
    ]);
  }
  const validation: ValidationItem[] = [];
  const optionErrors: OptionError[] = [];
  const fields: CheckedField[] = [];
  inputs.forEach((input, index) => {
    const checked = checkFieldDefinition(input, `fields.${index}.`);
    if (checked.ok) fields.push(checked.field);
    else {
      validation.push(...checked.validation);
      optionErrors.push(...checked.options);
    }
  });
  if (validation.length > 0) throw validationFailed(validation);
  if (optionErrors.length > 0) throw invalidFieldOptions(optionErrors);
  checkSchemaBytes(
    fields.reduce((sum, field) => sum + schemaBytesOf(field), 0),
    "fields",
  );
  const names = new Set<string>();
  for (const field of fields) {
    const key = foldName(field.name);
    if (names.has(key)) throw fieldNameTaken();
    names.add(key);
  }
  return fields;
}

/** Tables of a database, and their fields in position order. */
export class Tables {
  constructor(private readonly deps: { tx: Transactions; access: Access }) {}

  /**
   * Creates a table with its initial fields, all or nothing: any invalid field refuses the
   * whole request and nothing is written. The fields take positions 0, 1, ... in request order.
   */
  async create(
    call: Call,
    databaseId: bigint,
    rawName: string,
    rawDescription: string,
    inputs: FieldInput[],
  ): Promise<TableView> {
    const name = requiredName(rawName);
    const description = requiredDescription(rawDescription);
    const definitions = checkInitialFields(inputs);
    try {
      return await this.deps.tx.run(call, async (changes) => {
        const { em } = changes;
        const { database } = await this.deps.access.database(
          em,
          call.principal,
          databaseId,
          "write",
          "share",
        );
        if (await databaseFull(em, databaseId)) throw tableLimitExceeded();
        if (await tableNameUsed(em, databaseId, name)) throw tableNameTaken();
        const table = em.create(Table, { databaseId, name, description });
        await em.flush();
        const fields = definitions.map((definition, position) =>
          em.create(Field, { tableId: table.id, ...definition, position }),
        );
        await em.flush();
        // Links to tables of the database (the new table's own id is not known to the client):
        // each gets its inverse there. Lookups and rollups name a link of their own table,
        // which no initial field can know either: they are refused on `link_field_id`.
        const inverses: FieldRow[] = [];
        for (const [index, field] of fields.entries()) {
          const prefix = `fields.${index}.`;
          const target = await checkRelations(em, table, field, prefix);
          if (target) inverses.push(await addInverse(em, table, field, target, prefix));
        }
        const scope = {
          organizationId: database.organizationId,
          databaseId,
          tableId: table.id,
        };
        await changes.publish(SUBJECTS.tableCreated, TableCreatedSchema, {
          organizationId: database.organizationId,
          databaseId,
          tableId: table.id,
          name,
        });
        await changes.audit(
          scope,
          "table.created",
          { type: "table", id: table.id },
          valuesSet({ name, description }),
        );
        for (const field of [...fields, ...inverses]) {
          await announceFieldCreated(changes, scope, field);
        }
        return { table, fields };
      });
    } catch (error) {
      if (violates(error, TABLE_NAME_KEY)) throw tableNameTaken();
      if (violates(error, FIELD_NAME_KEY)) throw fieldNameTaken();
      throw error;
    }
  }

  async get(call: Call, tableId: bigint): Promise<TableView> {
    const em = this.deps.tx.em();
    const { table } = await this.deps.access.table(em, call.principal, tableId, "read");
    const fields = await em.find(Field, { tableId }, { orderBy: { position: "asc" } });
    return { table, fields };
  }

  /** Internal: a table with its fields and owner, for services, without a role check. */
  async schema(
    tableId: bigint,
  ): Promise<TableView & { organizationId: bigint; schemaVersion: bigint }> {
    const em = this.deps.tx.em();
    // The version is read before the table and its fields, so that it never claims a newer
    // schema than what is answered with it (a newer schema under an older version only costs
    // a fetch once the newer version's mark is there).
    const rows = await em.execute<{ organization_id: string; schema_version: string }[]>(
      `select d.organization_id, t.schema_version::text as schema_version
         from tables t join databases d on d.id = t.database_id where t.id = ?`,
      [tableId],
    );
    const table = rows[0] ? await em.findOne(Table, { id: tableId }) : null;
    if (!rows[0] || !table) throw notFound("table_not_found");
    const fields = await em.find(Field, { tableId }, { orderBy: { position: "asc" } });
    return {
      table,
      fields,
      organizationId: BigInt(rows[0].organization_id),
      schemaVersion: BigInt(rows[0].schema_version),
    };
  }

  /**
   * Internal: the ids of every organization's tables after `afterTableId`, ascending, at most
   * `limit` (1 to TABLE_IDS_PAGE; 0 means TABLE_IDS_PAGE). A deleted table is no longer here.
   */
  async ids(afterTableId: bigint, limit: number): Promise<bigint[]> {
    if (limit < 0 || limit > TABLE_IDS_PAGE) {
      throw validationFailed([
        {
          key: "limit",
          message: `must be between 1 and ${TABLE_IDS_PAGE}`,
          source: "body",
          code: "out_of_range",
        },
      ]);
    }
    const rows = await this.deps.tx
      .em()
      .execute<{ id: string }[]>(
        "select t.id::text as id from tables t where t.id > ? order by t.id limit ?",
        [afterTableId, limit || TABLE_IDS_PAGE],
      );
    return rows.map((row) => BigInt(row.id));
  }

  /** The database's tables, oldest first. */
  async list(call: Call, databaseId: bigint): Promise<TableRow[]> {
    const em = this.deps.tx.em();
    await this.deps.access.database(em, call.principal, databaseId, "read");
    return em.find(Table, { databaseId }, { orderBy: { id: "asc" } });
  }

  async update(
    call: Call,
    tableId: bigint,
    patch: { name?: string | undefined; description?: string | undefined },
  ): Promise<TableRow> {
    const name = patch.name === undefined ? undefined : requiredName(patch.name);
    const description =
      patch.description === undefined ? undefined : requiredDescription(patch.description);
    try {
      return await this.deps.tx.run(call, async (changes) => {
        const { em } = changes;
        const { table, database } = await this.deps.access.table(
          em,
          call.principal,
          tableId,
          "write",
          "update",
        );
        if (
          name !== undefined &&
          name !== table.name &&
          (await tableNameUsed(em, table.databaseId, name, tableId))
        ) {
          throw tableNameTaken();
        }
        const before = { name: table.name, description: table.description };
        if (name !== undefined) {
          table.name = name;
          table.nameKey = foldName(name);
        }
        if (description !== undefined) table.description = description;
        const changed = changesBetween(before, {
          name: table.name,
          description: table.description,
        });
        if (changed.length === 0) return table;
        await em.flush();
        await changes.publish(SUBJECTS.tableUpdated, TableUpdatedSchema, {
          organizationId: database.organizationId,
          databaseId: table.databaseId,
          tableId,
          name: table.name,
        });
        await changes.audit(
          scopeOf({ table, database }),
          "table.updated",
          { type: "table", id: tableId },
          changed,
        );
        return table;
      });
    } catch (error) {
      if (violates(error, TABLE_NAME_KEY)) throw tableNameTaken();
      throw error;
    }
  }

  /**
   * Deletes a table with its fields; records and files follow the event. The links of the
   * database's other tables that point to it go too, with what depends on them
   * (`deleteWithDependents`), each announced before the table.
   */
  async delete(call: Call, tableId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const access = await this.deps.access.table(em, call.principal, tableId, "write", "update");
      const { table, database } = access;
      const { databaseId } = table;
      const scope = { organizationId: database.organizationId, databaseId };
      // No link to this table can be added meanwhile (a new link locks its target, this row).
      // Their tables are locked, then the links read again: one deleted while this waited for
      // its table is not deleted twice.
      const linking = await linksInto(em, databaseId, tableId);
      await lockTables(em, [...new Set(linking.map((field) => field.tableId))]);
      const incoming = await linksInto(em, databaseId, tableId);
      const held = [tableId, ...linking.map((field) => field.tableId)];
      await deleteWithDependents(
        changes,
        scope,
        incoming.map((field) => field.id),
        held,
        tableId,
      );
      const fieldCount = await em.count(Field, { tableId });
      await em.nativeDelete(Table, { id: tableId });
      await changes.publish(SUBJECTS.tableDeleted, TableDeletedSchema, {
        organizationId: database.organizationId,
        databaseId,
        tableId,
      });
      await changes.audit(
        scopeOf(access),
        "table.deleted",
        { type: "table", id: tableId },
        valuesRemoved({
          name: table.name,
          description: table.description,
          field_count: fieldCount,
        }),
      );
    });
  }
}
