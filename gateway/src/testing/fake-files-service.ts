import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import {
  Code,
  createLogger,
  domainError,
  type GrpcServer,
  type Principal,
  requirePrincipal,
  startGrpcServer,
} from "@rowbase/kit";
import {
  ContentDisposition,
  type FileInfo,
  FileInfoSchema,
  FileServeHeaderSchema,
} from "@rowbase/proto/rowbase/files/v1/files_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";

/**
 * For tests: a files service in memory behind a real gRPC server, with the rules of the real
 * one reduced to what the gateway's tests need: records of organizations, file fields,
 * read-only tokens, a file size limit, sniffed content types, ranges and signed tokens. It
 * counts how uploads ended, so a test can tell a commit from a cancelled stream.
 */

export interface FakeRecord {
  organizationId: bigint;
  fileFields: bigint[];
}

interface StoredFile {
  info: FileInfo;
  bytes: Buffer;
  organizationId: bigint;
}

export interface FakeFilesState {
  records: Map<bigint, FakeRecord>;
  /** Live files by `row:field`. */
  live: Map<string, StoredFile>;
  /** Deleted files by `row:field`, newest last. */
  deleted: Map<string, StoredFile[]>;
  /** The plan's max_file_bytes, as the real service enforces it. */
  maxFileBytes: number;
  uploads: { committed: number; failed: number };
  /** The sizes of the chunks of the last upload. */
  lastChunks: number[];
  /** Principals the calls came with. */
  principals: Principal[];
}

export interface FakeFilesService {
  url: string;
  state: FakeFilesState;
  close(): Promise<void>;
}

const key = (rowId: bigint, fieldId: bigint) => `${rowId}:${fieldId}`;

function sniff(bytes: Buffer): string {
  if (bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) {
    return "image/png";
  }
  if (/^\s*</.test(bytes.subarray(0, 64).toString("latin1"))) return "text/html";
  return "application/octet-stream";
}

export async function startFakeFilesService(internalSecret: string): Promise<FakeFilesService> {
  const state: FakeFilesState = {
    records: new Map(),
    live: new Map(),
    deleted: new Map(),
    maxFileBytes: 1_000_000,
    uploads: { committed: 0, failed: 0 },
    lastChunks: [],
    principals: [],
  };

  function access(ctx: HandlerContext, rowId: bigint, fieldId: bigint, write: boolean) {
    const principal = requirePrincipal(ctx);
    state.principals.push(principal);
    const record = state.records.get(rowId);
    if (!record) throw domainError(Code.NotFound, "record_not_found");
    if (principal.kind === "api_token") {
      if (principal.organizationId !== record.organizationId) {
        throw domainError(Code.NotFound, "record_not_found");
      }
      if (write && principal.access === "read") {
        throw domainError(Code.PermissionDenied, "token_read_only");
      }
    }
    if (fieldId !== 0n && !record.fileFields.includes(fieldId)) {
      throw domainError(Code.InvalidArgument, "field_not_file_type");
    }
    return record;
  }

  function liveFile(rowId: bigint, fieldId: bigint): StoredFile {
    const file = state.live.get(key(rowId, fieldId));
    if (!file) throw domainError(Code.NotFound, "file_not_found");
    return file;
  }

  function touched(file: StoredFile, change: Partial<FileInfo>): StoredFile {
    return {
      ...file,
      info: create(FileInfoSchema, {
        ...file.info,
        ...change,
        updatedAt: timestampFromDate(new Date()),
      }),
    };
  }

  async function* serve(
    file: StoredFile,
    range:
      | { first: bigint; last?: bigint | undefined; suffixLength?: bigint | undefined }
      | undefined,
    download: boolean,
  ) {
    const size = BigInt(file.bytes.length);
    let served: { first: bigint; last: bigint } | undefined;
    if (range) {
      if (range.suffixLength !== undefined) {
        if (range.suffixLength <= 0n || size === 0n) {
          throw domainError(Code.OutOfRange, "range_not_satisfiable", { size: String(size) });
        }
        served = {
          first: range.suffixLength >= size ? 0n : size - range.suffixLength,
          last: size - 1n,
        };
      } else {
        if (range.first >= size) {
          throw domainError(Code.OutOfRange, "range_not_satisfiable", { size: String(size) });
        }
        const last = range.last === undefined || range.last >= size ? size - 1n : range.last;
        served = { first: range.first, last };
      }
    }
    const inline = file.info.contentType.startsWith("image/") && !download;
    yield {
      payload: {
        case: "header" as const,
        value: create(FileServeHeaderSchema, {
          file: file.info,
          organizationId: file.organizationId,
          disposition: inline ? ContentDisposition.INLINE : ContentDisposition.ATTACHMENT,
          ...(served ? { range: served } : {}),
        }),
      },
    };
    const bytes = served
      ? file.bytes.subarray(Number(served.first), Number(served.last) + 1)
      : file.bytes;
    // Small chunks, so that a body is always several messages.
    for (let offset = 0; offset < bytes.length; offset += 7) {
      yield { payload: { case: "chunk" as const, value: bytes.subarray(offset, offset + 7) } };
    }
  }

  const server: GrpcServer = await startGrpcServer({
    services: [FilesService],
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("fake-files", "silent"),
    internalSecret,
    routes: (router) =>
      router.service(FilesService, {
        async storageCheck(req, ctx) {
          access(ctx, req.rowId, 0n, true);
          if (req.fileSize > BigInt(state.maxFileBytes)) {
            throw domainError(Code.InvalidArgument, "file_too_large");
          }
          return {};
        },

        async uploadFile(requests, ctx) {
          const iterator = requests[Symbol.asyncIterator]();
          try {
            const first = await iterator.next();
            if (first.done || first.value.payload.case !== "header") {
              throw domainError(Code.InvalidArgument, "validation_failed");
            }
            const header = first.value.payload.value;
            const record = access(ctx, header.rowId, header.fieldId, true);
            const chunks: Buffer[] = [];
            state.lastChunks = [];
            let size = 0;
            for (;;) {
              const next = await iterator.next();
              if (next.done) break;
              // As the real service: the header is the first message, and only it.
              if (next.value.payload.case === "header") {
                throw domainError(Code.InvalidArgument, "validation_failed", {
                  extra: JSON.stringify([
                    {
                      key: "file",
                      message: "only the first message may be the header",
                      source: "body",
                    },
                  ]),
                });
              }
              if (next.value.payload.case !== "chunk") continue;
              const chunk = next.value.payload.value;
              size += chunk.byteLength;
              state.lastChunks.push(chunk.byteLength);
              if (size > state.maxFileBytes)
                throw domainError(Code.InvalidArgument, "file_too_large");
              chunks.push(Buffer.from(chunk));
            }
            const bytes = Buffer.concat(chunks);
            const now = timestampFromDate(new Date());
            const info = create(FileInfoSchema, {
              rowId: header.rowId,
              fieldId: header.fieldId,
              fileName: header.fileName,
              contentType: sniff(bytes),
              size: BigInt(bytes.length),
              sha256: createHash("sha256").update(bytes).digest("hex"),
              createdAt: now,
              updatedAt: now,
            });
            const k = key(header.rowId, header.fieldId);
            const previous = state.live.get(k);
            if (previous) {
              state.deleted.set(k, [
                ...(state.deleted.get(k) ?? []),
                touched(previous, { deletedAt: now }),
              ]);
            }
            state.live.set(k, { info, bytes, organizationId: record.organizationId });
            state.uploads.committed += 1;
            return { file: info };
          } catch (error) {
            state.uploads.failed += 1;
            throw error;
          }
        },

        async *serveFile(req, ctx) {
          if (req.rowId <= 0n || req.fieldId <= 0n)
            throw domainError(Code.NotFound, "file_not_found");
          access(ctx, req.rowId, req.fieldId, false);
          yield* serve(liveFile(req.rowId, req.fieldId), req.range, false);
        },

        async createFileUrl(req, ctx) {
          access(ctx, req.rowId, req.fieldId, false);
          liveFile(req.rowId, req.fieldId);
          const claims = `${req.rowId}:${req.fieldId}:${req.download ? 1 : 0}`;
          return {
            token: `${Buffer.from(claims).toString("base64url")}.signed`,
            expiresAt: timestampFromDate(new Date(Date.now() + 3_600_000)),
          };
        },

        async *serveSignedFile(req) {
          const match = /^([A-Za-z0-9_-]+)\.signed$/.exec(req.token);
          const claims = match ? Buffer.from(match[1]!, "base64url").toString() : "";
          const parts = /^(\d+):(\d+):([01])$/.exec(claims);
          if (!parts) throw domainError(Code.NotFound, "file_not_found");
          const file = liveFile(BigInt(parts[1]!), BigInt(parts[2]!));
          yield* serve(file, req.range, parts[3] === "1");
        },

        async renameFile(req, ctx) {
          if (req.rowId <= 0n || req.fieldId <= 0n)
            throw domainError(Code.NotFound, "file_not_found");
          access(ctx, req.rowId, req.fieldId, true);
          const k = key(req.rowId, req.fieldId);
          const renamed = touched(liveFile(req.rowId, req.fieldId), { fileName: req.fileName });
          state.live.set(k, renamed);
          return { file: renamed.info };
        },

        async deleteFile(req, ctx) {
          access(ctx, req.rowId, req.fieldId, true);
          const k = key(req.rowId, req.fieldId);
          const gone = touched(liveFile(req.rowId, req.fieldId), {
            deletedAt: timestampFromDate(new Date()),
          });
          state.live.delete(k);
          state.deleted.set(k, [...(state.deleted.get(k) ?? []), gone]);
          return { file: gone.info };
        },

        async restoreFile(req, ctx) {
          access(ctx, req.rowId, req.fieldId, true);
          const k = key(req.rowId, req.fieldId);
          const candidate = state.deleted.get(k)?.pop();
          if (!candidate) throw domainError(Code.NotFound, "file_not_found");
          const restored = touched(candidate, {});
          restored.info.deletedAt = undefined;
          state.live.set(k, restored);
          return { file: restored.info };
        },

        async listRecordFiles() {
          return { files: [] };
        },

        async getStorageUsage() {
          return { fileStorageBytes: 0n };
        },
      }),
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    state,
    close: () => server.close(),
  };
}
