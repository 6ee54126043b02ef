import { type EntityManager, UniqueConstraintViolationException } from "@mikro-orm/postgresql";

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
  await em.execute("select pg_advisory_xact_lock(hashtextextended(?, 0))", [
    `catalog.organization-databases:${organizationId}`,
  ]);
  const [row] = await em.execute<{ n: number }[]>(
    "select count(*)::int as n from databases where organization_id = ?",
    [organizationId],
  );
  return (row?.n ?? 0) >= MAX_DATABASES_PER_ORGANIZATION;
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
  await em.execute("select pg_advisory_xact_lock(hashtextextended(?, 0))", [
    `catalog.database-tables:${databaseId}`,
  ]);
  const [row] = await em.execute<{ n: number }[]>(
    "select count(*)::int as n from tables where database_id = ?",
    [databaseId],
  );
  return (row?.n ?? 0) >= MAX_TABLES_PER_DATABASE;
}

/** Whether another table of the database has this name, regardless of case. */
export async function tableNameUsed(
  em: EntityManager,
  databaseId: bigint,
  name: string,
  exceptId = 0n,
): Promise<boolean> {
  const rows = await em.execute(
    "select 1 from tables where database_id = ? and lower(name) = lower(?) and id <> ?",
    [databaseId, name, exceptId],
  );
  return rows.length > 0;
}

/** Whether another field of the table has this name, regardless of case. */
export async function fieldNameUsed(
  em: EntityManager,
  tableId: bigint,
  name: string,
  exceptId = 0n,
): Promise<boolean> {
  const rows = await em.execute(
    "select 1 from fields where table_id = ? and lower(name) = lower(?) and id <> ?",
    [tableId, name, exceptId],
  );
  return rows.length > 0;
}
