import { type EntityManager, LockMode } from "@mikro-orm/postgresql";
import {
  type Authorizer,
  Code,
  domainError,
  type Permission,
  type Principal,
  type Role,
} from "@rowbase/kit";
import {
  Database,
  type DatabaseRow,
  Field,
  type FieldRow,
  Table,
  type TableRow,
} from "./db/entities.js";

export type NotFoundReason =
  | "organization_not_found"
  | "database_not_found"
  | "table_not_found"
  | "field_not_found"
  | "form_not_found";

export function notFound(reason: NotFoundReason) {
  return domainError(Code.NotFound, reason);
}

/**
 * How a row is read inside a transaction: `update` for the row a write changes (and, for a
 * table, serialises every change of its fields), `share` for a parent that must not vanish
 * before the commit.
 */
export type RowLock = "update" | "share";

function lockOptions(lock: RowLock | undefined) {
  if (lock === "update") return { lockMode: LockMode.PESSIMISTIC_WRITE };
  if (lock === "share") return { lockMode: LockMode.PESSIMISTIC_READ };
  return {};
}

export interface TableAccess {
  table: TableRow;
  database: DatabaseRow;
  role: Role;
}

export interface FieldAccess extends TableAccess {
  field: FieldRow;
}

/**
 * Loads a database, table or field with its owner and checks the caller's role there through
 * kit's Authorizer: a missing resource and one of another organization are
 * the same 404, a viewer writing gets 403 organization_forbidden.
 */
export class Access {
  constructor(private readonly authorizer: Authorizer) {}

  async organization(
    principal: Principal,
    organizationId: bigint,
    permission: Permission,
    notFoundReason: NotFoundReason = "organization_not_found",
  ): Promise<Role> {
    return this.authorizer.authorize(principal, organizationId, permission, notFoundReason);
  }

  async database(
    em: EntityManager,
    principal: Principal,
    databaseId: bigint,
    permission: Permission,
    lock?: RowLock,
  ): Promise<{ database: DatabaseRow; role: Role }> {
    const database = await em.findOne(Database, { id: databaseId }, lockOptions(lock));
    if (!database) throw notFound("database_not_found");
    const role = await this.authorizer.authorize(
      principal,
      database.organizationId,
      permission,
      "database_not_found",
    );
    return { database, role };
  }

  async table(
    em: EntityManager,
    principal: Principal,
    tableId: bigint,
    permission: Permission,
    lock?: RowLock,
  ): Promise<TableAccess> {
    const table = await em.findOne(Table, { id: tableId }, lockOptions(lock));
    const database = table ? await em.findOne(Database, { id: table.databaseId }) : null;
    if (!table || !database) throw notFound("table_not_found");
    const role = await this.authorizer.authorize(
      principal,
      database.organizationId,
      permission,
      "table_not_found",
    );
    return { table, database, role };
  }

  /**
   * A field with its table and database. With `lockTable`, the table row is locked for update
   * first and the field read after it, so that the field's table cannot change under the call.
   */
  async field(
    em: EntityManager,
    principal: Principal,
    fieldId: bigint,
    permission: Permission,
    options: { lockTable?: boolean } = {},
  ): Promise<FieldAccess> {
    const found = await em.findOne(Field, { id: fieldId });
    if (!found) throw notFound("field_not_found");
    const table = await em.findOne(
      Table,
      { id: found.tableId },
      lockOptions(options.lockTable ? "update" : undefined),
    );
    const database = table ? await em.findOne(Database, { id: table.databaseId }) : null;
    // Re-read after the lock: a field deleted meanwhile is gone.
    const field = options.lockTable
      ? await em.findOne(Field, { id: fieldId }, { refresh: true })
      : found;
    if (!table || !database || !field) throw notFound("field_not_found");
    const role = await this.authorizer.authorize(
      principal,
      database.organizationId,
      permission,
      "field_not_found",
    );
    return { field, table, database, role };
  }
}

/** Where a table's events and audit entries belong. */
export function scopeOf({ table, database }: Pick<TableAccess, "table" | "database">) {
  return {
    organizationId: database.organizationId,
    databaseId: table.databaseId,
    tableId: table.id,
  };
}
