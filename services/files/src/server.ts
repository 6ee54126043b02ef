import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import {
  type Call,
  requestIdOf,
  requirePrincipal,
  requireService,
  validationFailed,
} from "@rowbase/kit";
import {
  ContentDisposition,
  type FileServeHeader,
  FileServeHeaderSchema,
  ServedRangeSchema,
} from "@rowbase/proto/rowbase/files/v1/files_pb";
import {
  FilesService,
  type UploadFileRequest,
} from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import type { Files, ServedFile } from "./files.js";
import { toFileInfo } from "./wire.js";

export interface FilesServerDeps {
  files: Files;
}

function callOf(ctx: HandlerContext): Call {
  return { principal: requirePrincipal(ctx), requestId: requestIdOf(ctx) };
}

function headerOf(served: ServedFile): FileServeHeader {
  return create(FileServeHeaderSchema, {
    file: toFileInfo(served.file),
    organizationId: served.file.organizationId,
    disposition:
      served.disposition === "inline" ? ContentDisposition.INLINE : ContentDisposition.ATTACHMENT,
    ...(served.range
      ? {
          range: create(ServedRangeSchema, {
            first: BigInt(served.range.first),
            last: BigInt(served.range.last),
          }),
        }
      : {}),
  });
}

/**
 * The chunks after the header; another header is a client error. Node's HTTP/2 server ends the
 * request body of a reset stream (a client that cancelled, or went away) as it ends a complete
 * one: only the call's signal tells them apart. A cancelled upload fails here, so the store
 * discards its bytes and nothing is committed.
 */
async function* chunksAfter(
  requests: AsyncIterator<UploadFileRequest>,
  signal: AbortSignal,
): AsyncGenerator<Uint8Array> {
  for (;;) {
    const next = await requests.next();
    if (next.done) {
      // A client that cancels may end the body just before it resets the stream (Node's HTTP/2
      // client does): the frames that already arrived are read before the end is trusted.
      await new Promise((resolve) => setImmediate(resolve));
      if (signal.aborted) throw new ConnectError("upload cancelled", Code.Canceled);
      return;
    }
    if (next.value.payload.case === "chunk") {
      yield next.value.payload.value;
    } else if (next.value.payload.case === "header") {
      throw validationFailed([
        {
          key: "file",
          message: "only the first message may be the header",
          source: "body",
          code: "invalid_value",
        },
      ]);
    }
  }
}

/** The header, then the bytes; the store's stream is closed however the call ends. */
async function* streamed<T>(
  served: ServedFile,
  wrap: (
    payload: { case: "header"; value: FileServeHeader } | { case: "chunk"; value: Uint8Array },
  ) => T,
): AsyncGenerator<T> {
  try {
    yield wrap({ case: "header", value: headerOf(served) });
    for await (const chunk of served.body) yield wrap({ case: "chunk", value: chunk });
  } finally {
    const body = served.body as { destroy?: () => void };
    body.destroy?.();
  }
}

/**
 * The files handlers: proto in, rule, proto out. Public RPCs act for the signed principal;
 * ServeSignedFile needs none (the token is the authority); ListRecordFiles and GetStorageUsage
 * answer other services only.
 */
export function createRoutes({ files }: FilesServerDeps) {
  return (router: ConnectRouter) =>
    router.service(FilesService, {
      async storageCheck(req, ctx) {
        await files.storageCheck(callOf(ctx), req.rowId, req.fileSize);
        return {};
      },

      async uploadFile(requests, ctx) {
        const call = callOf(ctx);
        const iterator = requests[Symbol.asyncIterator]();
        const first = await iterator.next();
        if (first.done || first.value.payload.case !== "header") {
          throw validationFailed([
            {
              key: "file",
              message: "the first message must be the header",
              source: "body",
              code: "invalid_value",
            },
          ]);
        }
        const header = first.value.payload.value;
        const file = await files.upload(
          call,
          {
            rowId: header.rowId,
            fieldId: header.fieldId,
            fileName: header.fileName,
            declaredSize: header.declaredSize,
          },
          chunksAfter(iterator, ctx.signal),
          ctx.signal,
        );
        return { file: toFileInfo(file) };
      },

      async *serveFile(req, ctx) {
        const served = await files.serve(callOf(ctx), req.rowId, req.fieldId, req.range);
        yield* streamed(served, (payload) => ({ payload }));
      },

      async createFileUrl(req, ctx) {
        const { token, expiresAt } = await files.createUrl(
          callOf(ctx),
          req.rowId,
          req.fieldId,
          req.download,
        );
        return { token, expiresAt: timestampFromDate(expiresAt) };
      },

      async *serveSignedFile(req, ctx) {
        const served = await files.serveSigned(req.token, req.range, requestIdOf(ctx));
        yield* streamed(served, (payload) => ({ payload }));
      },

      async renameFile(req, ctx) {
        const file = await files.rename(callOf(ctx), req.rowId, req.fieldId, req.fileName);
        return { file: toFileInfo(file) };
      },

      async deleteFile(req, ctx) {
        return { file: toFileInfo(await files.delete(callOf(ctx), req.rowId, req.fieldId)) };
      },

      async restoreFile(req, ctx) {
        return { file: toFileInfo(await files.restore(callOf(ctx), req.rowId, req.fieldId)) };
      },

      async listRecordFiles(req, ctx) {
        requireService(ctx);
        return { files: (await files.listForRows(req.rowIds)).map(toFileInfo) };
      },

      async getStorageUsage(req, ctx) {
        requireService(ctx);
        return { fileStorageBytes: BigInt(await files.storageUsage(req.organizationId)) };
      },
    });
}
