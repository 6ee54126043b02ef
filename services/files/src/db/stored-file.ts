import type { EntityManager } from "@mikro-orm/postgresql";

/**
 * A row of `file`, as the service works with it: one stored file of a pair (row_id, field_id).
 * At most one per pair is live (deleted_at null); replaced and deleted ones stay until purged,
 * `RETENTION_DAYS` after deleted_at. The table has no ORM entity: files reaches it through the
 * SQL here and beside its callers.
 */
export interface StoredFile {
  id: bigint;
  rowId: bigint;
  fieldId: bigint;
  tableId: bigint;
  organizationId: bigint;
  fileName: string;
  /** Sniffed from the bytes. */
  contentType: string;
  size: number;
  sha256: string;
  /** Random; where the bytes are in the blob store. */
  storageKey: string;
  /** Bumped on every soft delete: signed URLs carry it and die with it. */
  urlGeneration: number;
  createdAt: Date;
  updatedAt: Date;
  deletedAt: Date | null;
}

/** Soft-deleted files stay this long, then the purge job removes bytes and row. */
export const RETENTION_DAYS = 30;

export const FILE_COLUMNS = `id, row_id, field_id, table_id, organization_id, file_name, content_type,
  size, sha256, storage_key, url_generation, created_at, updated_at, deleted_at`;

export interface FileRecord {
  id: string;
  row_id: string;
  field_id: string;
  table_id: string;
  organization_id: string;
  file_name: string;
  content_type: string;
  size: string;
  sha256: string;
  storage_key: string;
  url_generation: number;
  created_at: Date | string;
  updated_at: Date | string;
  deleted_at: Date | string | null;
}

/** A timestamptz as the driver returns it (`2026-11-21 10:15:00.123456+00`, or a Date). */
export function timestampOf(value: Date | string): Date {
  if (value instanceof Date) return value;
  const iso = value.replace(" ", "T").replace(/([+-]\d\d)$/, "$1:00");
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) throw new Error(`unreadable timestamp ${value}`);
  return date;
}

export function storedFileOf(row: FileRecord): StoredFile {
  return {
    id: BigInt(row.id),
    rowId: BigInt(row.row_id),
    fieldId: BigInt(row.field_id),
    tableId: BigInt(row.table_id),
    organizationId: BigInt(row.organization_id),
    fileName: row.file_name,
    contentType: row.content_type,
    size: Number(row.size),
    sha256: row.sha256,
    storageKey: row.storage_key,
    urlGeneration: Number(row.url_generation),
    createdAt: timestampOf(row.created_at),
    updatedAt: timestampOf(row.updated_at),
    deletedAt: row.deleted_at ? timestampOf(row.deleted_at) : null,
  };
}

/** The live file of a pair, locked for update when `lock` (inside a transaction). */
export async function liveFile(
  em: EntityManager,
  rowId: bigint,
  fieldId: bigint,
  lock = false,
): Promise<StoredFile | undefined> {
  const rows = await em.execute<FileRecord[]>(
    `select ${FILE_COLUMNS} from file where row_id = ? and field_id = ? and deleted_at is null
     ${lock ? "for update" : ""}`,
    [rowId, fieldId],
  );
  return rows[0] ? storedFileOf(rows[0]) : undefined;
}

/** Runs an update or insert `... returning FILE_COLUMNS` and maps its one row. */
export async function returningFile(
  em: EntityManager,
  sql: string,
  params: unknown[],
): Promise<StoredFile> {
  const rows = await em.execute<FileRecord[]>(`${sql} returning ${FILE_COLUMNS}`, params);
  if (!rows[0]) throw new Error("statement returned no file");
  return storedFileOf(rows[0]);
}

/**
 * Subtracts released bytes from each organization's usage (`storage_usage`: the bytes of its
 * live and soft-deleted files until they are purged).
 */
export async function releaseUsage(
  em: EntityManager,
  released: { organization_id: string; size: string }[],
): Promise<void> {
  const perOrganization = new Map<string, bigint>();
  for (const row of released) {
    perOrganization.set(
      row.organization_id,
      (perOrganization.get(row.organization_id) ?? 0n) + BigInt(row.size),
    );
  }
  for (const [organizationId, bytes] of perOrganization) {
    if (bytes === 0n) continue;
    await em.execute(
      `update storage_usage
       set file_storage_bytes = greatest(0, file_storage_bytes - ?), updated_at = now()
       where organization_id = ?`,
      [bytes.toString(), organizationId],
    );
  }
}
