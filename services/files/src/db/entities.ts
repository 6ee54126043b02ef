import { defineEntity, type InferEntity, p } from "@mikro-orm/postgresql";

/**
 * One stored file of a pair (row_id, field_id). At most one per pair is live (deleted_at null);
 * replaced and deleted ones stay until purged, 30 days after deleted_at.
 */
export const File = defineEntity({
  name: "File",
  tableName: "file",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    rowId: p.bigint().columnType("bigint"),
    fieldId: p.bigint().columnType("bigint"),
    tableId: p.bigint().columnType("bigint"),
    organizationId: p.bigint().columnType("bigint"),
    fileName: p.text(),
    /** Sniffed from the bytes. */
    contentType: p.text(),
    size: p.bigint().columnType("bigint"),
    sha256: p.text(),
    /** Random; where the bytes are in the blob store. */
    storageKey: p.text().unique(),
    /** Bumped on every soft delete: signed URLs carry it and die with it. */
    urlGeneration: p.integer().default(0),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    deletedAt: p.datetime().nullable(),
  },
});

/** Bytes an organization stores (live and soft-deleted files until purged). */
export const StorageUsage = defineEntity({
  name: "StorageUsage",
  tableName: "storage_usage",
  properties: {
    organizationId: p.bigint().primary().columnType("bigint"),
    fileStorageBytes: p.bigint().columnType("bigint"),
    updatedAt: p.datetime(),
  },
});

export const entities = [File, StorageUsage];

export type FileRow = InferEntity<typeof File>;
