import type { JsonObject } from "@bufbuild/protobuf";
import { type EntityManager, UniqueConstraintViolationException } from "@mikro-orm/postgresql";
import { foldName } from "@rowbase/kit/field-types";
import { schemaBytesOf } from "../domain/schema-size.js";

/** Whether `error` is a unique violation of the named constraint or unique index. */
export function violates(error: unknown, constraint: string): boolean {
  return (
    error instanceof UniqueConstraintViolationException &&
    (error as { constraint?: string }).constraint === constraint
  );
}

export const TABLE_NAME_KEY = "tables_database_name_key";
export const FIELD_NAME_KEY = "fields_table_name_key";

function organizationLockKey(organizationId: bigint): string {
  return `catalog.organization:${organizationId}`;
}

/**
 * Taken (shared) by every database create of the organization until its transaction ends, and
 * exclusively by the organization's deletion: a create either commits before the deletion
 * reads what to delete, or runs after it and finds the organization gone.
 */
export async function lockOrganizationShared(
  em: EntityManager,
  organizationId: bigint,
): Promise<void> {
  await em.execute("select pg_advisory_xact_lock_shared(hashtextextended(?, 0))", [
    organizationLockKey(organizationId),
  ]);
}

export async function lockOrganizationExclusive(
  em: EntityManager,
  organizationId: bigint,
): Promise<void> {
  await em.execute("select pg_advisory_xact_lock(hashtextextended(?, 0))", [
    organizationLockKey(organizationId),
  ]);
}

export async function organizationDeleted(
  em: EntityManager,
  organizationId: bigint,
): Promise<boolean> {
  const rows = await em.execute<{ found: number }[]>(
    "select 1 as found from deleted_organizations where organization_id = ?",
    [organizationId],
  );
  return rows.length > 0;
}

/** Databases one organization may hold (Airtable's limit of bases per workspace). */
export const MAX_DATABASES_PER_ORGANIZATION = 1_000;

/**
 * Whether the organization holds MAX_DATABASES_PER_ORGANIZATION databases already, counted under
 * a per-organization lock held to the end of the transaction, so parallel creates cannot pass
 * it. The limit bounds what the organization's deletion does in one transaction.
 */
export async function organizationFull(
  em: EntityManager,
  organizationId: bigint,
): Promise<boolean> {
  const held = await countUnderLock(
    em,
    `catalog.organization-databases:${organizationId}`,
    "select count(*)::int as n from databases where organization_id = ?",
    organizationId,
  );
  return held >= MAX_DATABASES_PER_ORGANIZATION;
}

/**
 * A count taken under an advisory lock on `lockKey` held to the end of the transaction: two
 * transactions that count and then add under the same key cannot both see room for one more.
 */
export async function countUnderLock(
  em: EntityManager,
  lockKey: string,
  countSql: string,
  id: bigint,
): Promise<number> {
  await em.execute("select pg_advisory_xact_lock(hashtextextended(?, 0))", [lockKey]);
  const [row] = await em.execute<{ n: number }[]>(countSql, [id]);
  return row?.n ?? 0;
}

/** Tables one database may hold (Airtable's limit per base). */
export const MAX_TABLES_PER_DATABASE = 1_000;

/**
 * Whether the database holds MAX_TABLES_PER_DATABASE tables already. The count is taken under a
 * per-database lock held to the end of the transaction, so parallel creates cannot pass it.
 * The limit keeps what a deletion of the database sends and locks bounded: its event and audit
 * entry list every table, and records and files lock each table while deleting its rows.
 */
export async function databaseFull(em: EntityManager, databaseId: bigint): Promise<boolean> {
  const held = await countUnderLock(
    em,
    `catalog.database-tables:${databaseId}`,
    "select count(*)::int as n from tables where database_id = ?",
    databaseId,
  );
  return held >= MAX_TABLES_PER_DATABASE;
}

/** Whether another table of the database has this name, regardless of case (foldName). */
export async function tableNameUsed(
  em: EntityManager,
  databaseId: bigint,
  name: string,
  exceptId = 0n,
): Promise<boolean> {
  return nameUsed(em, "tables", "database_id", databaseId, name, exceptId);
}

/** Whether another field of the table has this name, regardless of case (foldName). */
export async function fieldNameUsed(
  em: EntityManager,
  tableId: bigint,
  name: string,
  exceptId = 0n,
): Promise<boolean> {
  return nameUsed(em, "fields", "table_id", tableId, name, exceptId);
}

/**
 * Whether a row of `table` under the same `scope` other than `exceptId` has a name that folds to
 * the same key. The unique index on the key decides between parallel calls; rows the migration
 * NameKeys left without a key (a name equal to an older one only under the new rule) are folded
 * here, so that no further name joins them.
 */
async function nameUsed(
  em: EntityManager,
  table: "tables" | "fields",
  scope: "database_id" | "table_id",
  scopeId: bigint,
  name: string,
  exceptId: bigint,
): Promise<boolean> {
  const key = foldName(name);
  const rows = await em.execute<{ name: string; name_key: string | null }[]>(
    `select name, name_key from ${table}
      where ${scope} = ? and (name_key = ? or name_key is null) and id <> ?`,
    [scopeId, key, exceptId],
  );
  return rows.some((row) => (row.name_key ?? foldName(row.name)) === key);
}

/**
 * What the table's fields other than `exceptId` hold in names, descriptions and options
 * (`schemaBytesOf`). Read under the table's row lock, which every change of its fields takes,
 * so that parallel changes cannot together pass MAX_SCHEMA_BYTES.
 */
export async function otherFieldsBytes(
  em: EntityManager,
  tableId: bigint,
  exceptId = 0n,
): Promise<number> {
  const rows = await em.execute<{ name: string; description: string; options: JsonObject }[]>(
    "select name, description, options from fields where table_id = ? and id <> ?",
    [tableId, exceptId],
  );
  return rows.reduce((sum, row) => sum + schemaBytesOf(row), 0);
}
