import type { EntityManager } from "@mikro-orm/postgresql";
import type { Logger } from "@rowbase/kit";
import {
  type Call,
  Code,
  ConnectError,
  changesBetween,
  textProblemCode,
  validationFailed,
  valuesSet,
} from "@rowbase/kit";
import { fieldAcceptsFile, fileSettingsOf } from "@rowbase/kit/field-types";
import {
  type Access,
  fieldNotFound,
  fileNotFound,
  type PairTarget,
  recordNotFound,
} from "./access.js";
import type { ChangeSet, Transactions } from "./change-set.js";
import { deletedScopeOf, lockPair, lockScopesShared, type Scope } from "./db/scopes.js";
import {
  FILE_COLUMNS,
  type FileRecord,
  liveFile,
  RETENTION_DAYS,
  returningFile,
  type StoredFile,
  storedFileOf,
} from "./db/stored-file.js";
import { type RequestedRange, type ResolvedRange, resolveRange } from "./domain/byte-range.js";
import { ContentSniffer } from "./domain/content-sniffer.js";
import { type Disposition, dispositionFor } from "./domain/disposition.js";
import { checkFileName, uploadFileName } from "./domain/file-name.js";
import { signFileUrl, verifyFileUrl } from "./domain/signed-url.js";
import { fileTooLarge, rangeNotSatisfiable, storageLimitExceeded } from "./errors.js";
import {
  BlobNotFoundError,
  type BlobStore,
  BlobTooLargeError,
  newStorageKey,
} from "./storage/index.js";
import type { Upstream } from "./upstream.js";

export interface FilesDeps {
  tx: Transactions;
  access: Access;
  upstream: Upstream;
  blobs: BlobStore;
  urlSecret: string;
  urlTtlSeconds: number;
  logger: Logger;
}

/** The first message of an upload. */
export interface UploadHeader {
  rowId: bigint;
  fieldId: bigint;
  fileName: string;
  /** What the client announced, 0 when unknown; only an early check. */
  declaredSize: bigint;
}

/** A file about to be streamed: its metadata, presentation and the bytes that follow. */
export interface ServedFile {
  file: StoredFile;
  disposition: Disposition;
  /** The bytes that follow when a range was asked for; undefined: the whole file. */
  range: ResolvedRange | undefined;
  body: AsyncIterable<Uint8Array>;
}

/** How long an upload may take before the collector treats its bytes as abandoned. */
const UPLOAD_RESERVATION_HOURS = 24;

/** The largest list ListRecordFiles answers in one call. */
export const MAX_LISTED_ROWS = 10_000;

function auditSnapshot(file: StoredFile) {
  return {
    file_name: file.fileName,
    content_type: file.contentType,
    size: file.size,
    sha256: file.sha256,
  };
}

function scopesOf(target: PairTarget): Scope[] {
  return [
    { kind: "organization", id: target.organizationId },
    { kind: "table", id: target.tableId },
    { kind: "field", id: target.fieldId },
    { kind: "row", id: target.rowId },
  ];
}

/**
 * Passes the upload's bytes on to the store while the sniffer looks at them, and stops with
 * storage_limit_exceeded as soon as they pass the room the organization had when the upload
 * started (the binding check is the conditional usage update at commit).
 */
async function* observed(
  body: AsyncIterable<Uint8Array>,
  sniffer: ContentSniffer,
  room: number,
): AsyncGenerator<Uint8Array> {
  let seen = 0;
  for await (const chunk of body) {
    seen += chunk.byteLength;
    if (seen > room) throw storageLimitExceeded();
    sniffer.feed(chunk);
    yield chunk;
  }
}

/**
 * Files of records: upload, serve, signed URLs, rename, soft delete and restore, with the plan's
 * storage and size limits. Bytes go to the blob store outside any transaction; the metadata and
 * the organization's usage change together in one.
 */
export class Files {
  constructor(private readonly deps: FilesDeps) {}

  private async usageOf(em: EntityManager, organizationId: bigint): Promise<number> {
    const rows = await em.execute<{ file_storage_bytes: string }[]>(
      "select file_storage_bytes from storage_usage where organization_id = ?",
      [organizationId],
    );
    return Number(rows[0]?.file_storage_bytes ?? 0);
  }

  /** Whether a file of `fileSize` bytes would fit the plan; throws the error an upload would. */
  async storageCheck(call: Call, rowId: bigint, fileSize: bigint): Promise<void> {
    if (fileSize < 0n) {
      throw validationFailed([
        { key: "file_size", message: "must be 0 or more", source: "query", code: "out_of_range" },
      ]);
    }
    const target = await this.deps.access.record(call.principal, rowId, "write", call.requestId);
    const limits = await this.deps.upstream.planLimits(target.organizationId, call.requestId);
    if (fileSize > limits.maxFileBytes) throw fileTooLarge(Number(limits.maxFileBytes));
    const used = BigInt(await this.usageOf(this.deps.tx.em(), target.organizationId));
    if (used + fileSize > limits.fileStorageBytes) throw storageLimitExceeded();
  }

  /**
   * Stores a file for the pair and soft-deletes the one it replaces. The bytes stream to the
   * store, cut at the smaller of the plan's max_file_bytes and the field's max_size
   * (file_too_large); the content type is sniffed on the way; the usage update at commit refuses
   * what would pass file_storage_bytes, however many uploads race. Whatever refuses the upload,
   * its bytes are removed before the error returns.
   */
  async upload(
    call: Call,
    header: UploadHeader,
    body: AsyncIterable<Uint8Array>,
    cancelled?: AbortSignal,
  ): Promise<StoredFile> {
    if (header.declaredSize < 0n) {
      throw validationFailed([
        { key: "file", message: "size must be 0 or more", source: "body", code: "out_of_range" },
      ]);
    }
    const fileName = uploadFileName(header.fileName);
    const target = await this.deps.access.pair(
      call.principal,
      header.rowId,
      header.fieldId,
      "write",
      call.requestId,
    );
    const limits = await this.deps.upstream.planLimits(target.organizationId, call.requestId);
    const fieldMax = fileSettingsOf(target.field).maxSize;
    const maxBytes = Math.min(Number(limits.maxFileBytes), fieldMax ?? Number.MAX_SAFE_INTEGER);
    if (Number(header.declaredSize) > maxBytes) throw fileTooLarge(maxBytes);
    const storageLimit = Number(limits.fileStorageBytes);
    const room = storageLimit - (await this.usageOf(this.deps.tx.em(), target.organizationId));
    if (Number(header.declaredSize) > room) throw storageLimitExceeded();

    const key = newStorageKey();
    await this.deps.tx
      .em()
      .execute(
        `insert into blob_gc (storage_key, due_at) values (?, now() + interval '${UPLOAD_RESERVATION_HOURS} hours')`,
        [key],
      );
    try {
      const sniffer = new ContentSniffer();
      const stored = await this.deps.blobs.put(key, observed(body, sniffer, room), { maxBytes });
      const contentType = await sniffer.contentType();
      checkFieldTakes(target, { contentType, size: stored.size }, maxBytes, "file", "body");
      return await this.deps.tx.run(call, (changes) =>
        this.commitUpload(changes, target, {
          key,
          fileName,
          contentType,
          size: stored.size,
          sha256: stored.sha256,
          storageLimit,
          cancelled,
        }),
      );
    } catch (error) {
      await this.discard(key);
      if (error instanceof BlobTooLargeError) throw fileTooLarge(error.maxBytes);
      throw error;
    }
  }

  private async commitUpload(
    changes: ChangeSet,
    target: PairTarget,
    stored: {
      key: string;
      fileName: string;
      contentType: string;
      size: number;
      sha256: string;
      storageLimit: number;
      cancelled: AbortSignal | undefined;
    },
  ): Promise<StoredFile> {
    const { em } = changes;
    const scopes = scopesOf(target);
    await lockScopesShared(em, scopes);
    const deleted = await deletedScopeOf(em, scopes);
    if (deleted === "field") throw fieldNotFound();
    if (deleted) throw recordNotFound();
    await lockPair(em, target.rowId, target.fieldId);
    await em.execute(
      "insert into storage_usage (organization_id) values (?) on conflict do nothing",
      [target.organizationId],
    );
    const counted = await em.execute(
      `update storage_usage set file_storage_bytes = file_storage_bytes + ?, updated_at = now()
       where organization_id = ? and file_storage_bytes + ? <= ?
       returning file_storage_bytes`,
      [stored.size, target.organizationId, stored.size, stored.storageLimit],
    );
    if (counted.length === 0) throw storageLimitExceeded();
    const previous = await liveFile(em, target.rowId, target.fieldId, true);
    if (previous) {
      await em.execute(
        `update file set deleted_at = now(), updated_at = now(), url_generation = url_generation + 1
         where id = ?`,
        [previous.id],
      );
    }
    const created = await returningFile(
      em,
      `insert into file (row_id, field_id, table_id, organization_id, file_name, content_type,
         size, sha256, storage_key)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        target.rowId,
        target.fieldId,
        target.tableId,
        target.organizationId,
        stored.fileName,
        stored.contentType,
        stored.size,
        stored.sha256,
        stored.key,
      ],
    );
    await em.execute("delete from blob_gc where storage_key = ?", [stored.key]);
    await changes.audit(
      target,
      "file.uploaded",
      target,
      previous
        ? changesBetween(auditSnapshot(previous), auditSnapshot(created))
        : valuesSet(auditSnapshot(created)),
    );
    // The last moment a cancelled call can still be undone: a reset that arrives after the
    // body ended but before this commit rolls the upload back instead of storing it.
    if (stored.cancelled?.aborted) throw new ConnectError("upload cancelled", Code.Canceled);
    return created;
  }

  /** Removes the bytes of a refused upload; the collector retries if the store fails now. */
  private async discard(key: string): Promise<void> {
    const em = this.deps.tx.em();
    try {
      await this.deps.blobs.delete(key);
      await em.execute("delete from blob_gc where storage_key = ?", [key]);
    } catch (error) {
      this.deps.logger.warn({ err: error, storage_key: key }, "could not remove refused upload");
      await em
        .execute("update blob_gc set due_at = now() where storage_key = ?", [key])
        .catch(() => undefined);
    }
  }

  /** The pair's live file, streamed, for a caller who may read the record. */
  async serve(
    call: Call,
    rowId: bigint,
    fieldId: bigint,
    range: RequestedRange | undefined,
  ): Promise<ServedFile> {
    if (rowId <= 0n || fieldId <= 0n) throw fileNotFound();
    await this.deps.access.pair(call.principal, rowId, fieldId, "read", call.requestId);
    const file = await liveFile(this.deps.tx.em(), rowId, fieldId);
    if (!file) throw fileNotFound();
    return this.open(file, range, false);
  }

  private async open(
    file: StoredFile,
    requested: RequestedRange | undefined,
    download: boolean,
  ): Promise<ServedFile> {
    const range = resolveRange(requested, file.size);
    if (range === "unsatisfiable") throw rangeNotSatisfiable(file.size);
    try {
      const body = await this.deps.blobs.get(file.storageKey, range);
      return { file, disposition: dispositionFor(file.contentType, download), range, body };
    } catch (error) {
      if (error instanceof BlobNotFoundError) {
        // Purged or deleted between the metadata read and now.
        this.deps.logger.warn({ file_id: file.id.toString() }, "file bytes missing");
        throw fileNotFound();
      }
      throw error;
    }
  }

  /**
   * A signed token for the pair's live file, valid FILE_URL_TTL_SECONDS. It names the file and
   * its URL generation, so replacing or deleting the file kills it.
   */
  async createUrl(
    call: Call,
    rowId: bigint,
    fieldId: bigint,
    download: boolean,
  ): Promise<{ token: string; expiresAt: Date }> {
    if (rowId <= 0n || fieldId <= 0n) throw fileNotFound();
    await this.deps.access.pair(call.principal, rowId, fieldId, "read", call.requestId);
    const file = await liveFile(this.deps.tx.em(), rowId, fieldId);
    if (!file) throw fileNotFound();
    const expiresAt = Math.floor(Date.now() / 1000) + this.deps.urlTtlSeconds;
    const token = signFileUrl(this.deps.urlSecret, {
      rowId,
      fieldId,
      fileId: file.id,
      generation: file.urlGeneration,
      expiresAt,
      download,
    });
    return { token, expiresAt: new Date(expiresAt * 1000) };
  }

  /**
   * The file a signed token names, if the token is genuine, unexpired, the file unchanged and
   * its organization, record, table and field still there. The file's row alone is not enough:
   * the files of a deleted organization, record, field or table are marked deleted only when the
   * deletion's event is applied here, which a stopped consumer or bus can put off for as long as
   * it lasts. Records answers for the record, at one uncached call per download: no shared
   * entry of a record exists. The organization's plan, the table and the field come from the
   * entries shared with records and the gateway, which organization and catalog mark when a
   * deletion of them commits.
   */
  async serveSigned(
    token: string,
    range: RequestedRange | undefined,
    requestId: string,
  ): Promise<ServedFile> {
    const claims = verifyFileUrl(this.deps.urlSecret, token, Math.floor(Date.now() / 1000));
    if (!claims) throw fileNotFound();
    const rows = await this.deps.tx.em().execute<FileRecord[]>(
      `select ${FILE_COLUMNS} from file
       where id = ? and row_id = ? and field_id = ? and url_generation = ? and deleted_at is null`,
      [claims.fileId, claims.rowId, claims.fieldId, claims.generation],
    );
    if (!rows[0]) throw fileNotFound();
    const home = await this.deps.upstream.resolveRecord(claims.rowId, requestId);
    const [schema] = await Promise.all([
      this.deps.upstream.tableSchema(home.tableId, requestId),
      // A deleted organization has no plan: record_not_found.
      this.deps.upstream.planLimits(home.organizationId, requestId),
    ]);
    if (!schema) throw recordNotFound();
    if (!schema.fields.some((field) => field.id === claims.fieldId.toString())) {
      throw fileNotFound();
    }
    return this.open(storedFileOf(rows[0]), range, claims.download);
  }

  /**
   * The pair a rename, delete or restore writes. An id of 0 (rename's default) names no file, but
   * the caller's right on a record it names comes first, as for any other field id: a read token
   * gets token_read_only and a viewer organization_forbidden, whatever the field.
   */
  private async writablePair(call: Call, rowId: bigint, fieldId: bigint): Promise<PairTarget> {
    if (rowId <= 0n) throw fileNotFound();
    if (fieldId <= 0n) {
      await this.deps.access.record(call.principal, rowId, "write", call.requestId);
      throw fileNotFound();
    }
    return this.deps.access.pair(call.principal, rowId, fieldId, "write", call.requestId);
  }

  async rename(call: Call, rowId: bigint, fieldId: bigint, rawName: string): Promise<StoredFile> {
    const checked = checkFileName(rawName);
    if ("problem" in checked) {
      throw validationFailed([
        {
          key: "file_name",
          message: checked.problem,
          source: "body",
          code: textProblemCode(rawName.trim(), checked.problem),
        },
      ]);
    }
    const target = await this.writablePair(call, rowId, fieldId);
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      await lockPair(em, rowId, fieldId);
      const file = await liveFile(em, rowId, fieldId, true);
      if (!file) throw fileNotFound();
      if (file.fileName === checked.name) return file;
      const renamed = await returningFile(
        em,
        "update file set file_name = ?, updated_at = now() where id = ?",
        [checked.name, file.id],
      );
      await changes.audit(target, "file.renamed", target, [
        { key: "file_name", old: file.fileName, new: renamed.fileName },
      ]);
      return renamed;
    });
  }

  /** Soft-deletes the pair's live file; it can be restored for 30 days. */
  async delete(call: Call, rowId: bigint, fieldId: bigint): Promise<StoredFile> {
    const target = await this.writablePair(call, rowId, fieldId);
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      await lockPair(em, rowId, fieldId);
      const file = await liveFile(em, rowId, fieldId, true);
      if (!file) throw fileNotFound();
      const deleted = await returningFile(
        em,
        `update file set deleted_at = now(), updated_at = now(), url_generation = url_generation + 1
         where id = ?`,
        [file.id],
      );
      await changes.audit(target, "file.deleted", target, [
        { key: "file_name", old: file.fileName },
        { key: "deleted_at", old: null, new: deleted.deletedAt!.toISOString() },
      ]);
      return deleted;
    });
  }

  /**
   * Brings back the pair's most recently deleted file (within the 30 days). A live file, if
   * any, is soft-deleted in its place, so restore undoes the last replacement and a second
   * restore undoes the first. Storage usage does not change: deleted files count until purged.
   */
  async restore(call: Call, rowId: bigint, fieldId: bigint): Promise<StoredFile> {
    const target = await this.writablePair(call, rowId, fieldId);
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const scopes = scopesOf(target);
      await lockScopesShared(em, scopes);
      const gone = await deletedScopeOf(em, scopes);
      if (gone === "field") throw fieldNotFound();
      if (gone) throw recordNotFound();
      await lockPair(em, rowId, fieldId);
      const candidates = await em.execute<FileRecord[]>(
        `select ${FILE_COLUMNS} from file
         where row_id = ? and field_id = ? and deleted_at is not null
           and deleted_at > now() - interval '${RETENTION_DAYS} days'
         order by deleted_at desc, id desc limit 1 for update`,
        [rowId, fieldId],
      );
      if (!candidates[0]) throw fileNotFound();
      const candidate = storedFileOf(candidates[0]);
      // The field's rules as they are now: its max_size or allowed_types may have changed since.
      const fieldMax = fileSettingsOf(target.field).maxSize ?? Number.MAX_SAFE_INTEGER;
      checkFieldTakes(target, candidate, fieldMax, "file", "query");
      const live = await liveFile(em, rowId, fieldId, true);
      if (live) {
        await em.execute(
          `update file set deleted_at = now(), updated_at = now(), url_generation = url_generation + 1
           where id = ?`,
          [live.id],
        );
      }
      const restored = await returningFile(
        em,
        "update file set deleted_at = null, updated_at = now() where id = ?",
        [candidate.id],
      );
      await changes.audit(target, "file.restored", target, [
        { key: "file_name", new: restored.fileName },
        { key: "deleted_at", old: candidate.deletedAt!.toISOString(), new: null },
        ...(live ? [{ key: "replaced_file_name", old: live.fileName }] : []),
      ]);
      return restored;
    });
  }

  /** The live files of records, for records to fill file fields. */
  async listForRows(rowIds: bigint[]): Promise<StoredFile[]> {
    if (rowIds.length > MAX_LISTED_ROWS) {
      throw validationFailed([
        {
          key: "row_ids",
          message: `at most ${MAX_LISTED_ROWS} rows`,
          source: "body",
          code: "out_of_range",
        },
      ]);
    }
    const ids = [...new Set(rowIds)].filter((id) => id > 0n);
    if (ids.length === 0) return [];
    const rows = await this.deps.tx.em().execute<FileRecord[]>(
      `select ${FILE_COLUMNS} from file
       where row_id in (?) and deleted_at is null order by row_id, field_id`,
      [ids],
    );
    return rows.map(storedFileOf);
  }

  /** Bytes an organization stores, deleted files included until purged. */
  async storageUsage(organizationId: bigint): Promise<number> {
    return this.usageOf(this.deps.tx.em(), organizationId);
  }
}

/**
 * Refuses a file its field's options do not take: over `max_size` (413 file_too_large, naming
 * `maxBytes`) or of a type outside `allowed_types` (400 on `key`).
 */
function checkFieldTakes(
  target: PairTarget,
  file: { contentType: string; size: number },
  maxBytes: number,
  key: string,
  source: "body" | "query",
): void {
  const accepted = fieldAcceptsFile(target.field, { mimeType: file.contentType, size: file.size });
  if (accepted.ok) return;
  if (accepted.reason === "file_too_large") throw fileTooLarge(maxBytes);
  const allowed = fileSettingsOf(target.field).allowedTypes ?? [];
  throw validationFailed([
    {
      key,
      message: `is ${file.contentType}, this field takes ${allowed.join(", ")}`,
      source,
      code: "invalid_value",
    },
  ]);
}
