import type { CallOptions, Client } from "@connectrpc/connect";
import type { DedicatedServiceClient } from "@rowbase/kit";
import type { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import type { z } from "zod";
import type { ApiTokenCaller, SessionCaller } from "../../auth/authenticate.js";
import { RPC_TIMEOUT_MS } from "../../auth/downstream-call.js";
import { httpErrorOf } from "../../errors/error-table.js";
import type { GatewayContext } from "../../gateway-context.js";
import { timeOf } from "../../presentation/wire-values.js";
import type { ApiCallQuota } from "../../quota/api-call-quota.js";
import type { RecordOrganizations } from "../../quota/record-organizations.js";
import {
  RESERVATION_BLOCK_BYTES,
  type TransferContext,
  type TransferQuota,
} from "../../quota/transfer-quota.js";
import type { RequestedRange } from "./byte-range.js";
import { presentFileInfo } from "./file-presenters.js";
import type {
  FileDeleteSchema,
  FileRenameSchema,
  FileRestoreSchema,
  FileUploadSchema,
  FileUrlSchema,
} from "./file-schemas.js";
import { UPLOAD_PART } from "./file-schemas.js";
import { sendFile } from "./file-serving.js";
import {
  fileTooLarge,
  MULTIPART_FRAMING_BYTES,
  receiveUpload,
  UPLOAD_ABANDONED,
} from "./multipart-upload.js";

/** The request a file call is made for. */
export interface FileCall {
  caller: SessionCaller | ApiTokenCaller;
  /** The gRPC options of the request: its id and the caller's signed principal. */
  call: CallOptions;
  ctx: GatewayContext;
}

export interface FileOperationsDeps {
  files: Client<typeof FilesService>;
  /**
   * A client of the files service over a connection of its own, for one upload: an upload the
   * service refuses mid-stream leaves its stream half-open (connect-node neither ends nor
   * resets it), and only dropping the connection afterwards frees it.
   */
  uploadClient(): DedicatedServiceClient<typeof FilesService>;
  quota: ApiCallQuota;
  transfer: TransferQuota;
  recordOrganizations: Pick<RecordOrganizations, "organizationOf">;
  /** `PUBLIC_BASE_URL`: where signed file URLs point. */
  publicBaseUrl: string;
  /** The absolute ceiling of an upload, whatever the plan (whose `max_file_bytes` applies below it). */
  uploadMaxBytes: number;
}

type Data<S extends z.ZodType> = z.output<S>;

/**
 * A streaming call runs as long as its bytes take; its own deadline would cut large files.
 * Waiting phases have theirs instead (the metadata of a serve, the answer after an upload).
 */
function streaming(call: CallOptions, signal: AbortSignal): CallOptions {
  const { timeoutMs: _deadline, ...rest } = call;
  return { ...rest, signal };
}

/** The byte range for ByteRange: unset fields stay unset. */
function byteRangeOf(range: RequestedRange | undefined) {
  if (!range) return undefined;
  return "suffixLength" in range
    ? { first: 0n, suffixLength: range.suffixLength }
    : { first: range.first, ...(range.last !== undefined ? { last: range.last } : {}) };
}

/**
 * UploadFile's messages: the header, then the chunks. An abandoned upload ends with a second
 * header, which the contract refuses ("the first message, and only it"), so the service fails
 * the call and stores nothing even where a cancelled stream would reach it as a clean end.
 */
async function* uploadMessages(
  header: { rowId: bigint; fieldId: bigint; fileName: string },
  chunks: AsyncIterable<Uint8Array | typeof UPLOAD_ABANDONED>,
) {
  const first = { payload: { case: "header" as const, value: { ...header, declaredSize: 0n } } };
  yield first;
  for await (const chunk of chunks) {
    if (chunk === UPLOAD_ABANDONED) {
      yield first;
      return;
    }
    yield { payload: { case: "chunk" as const, value: chunk } };
  }
}

/** The most bytes an upload's file may have: the plan's `max_file_bytes`, within `absolute`. */
function uploadCeiling(maxFileBytes: bigint, absolute: number): number {
  return maxFileBytes < BigInt(absolute) ? Number(maxFileBytes) : absolute;
}

/**
 * Whether a failed upload is known to have stored nothing, and so counts no transfer: a refusal
 * (a 4xx), by the gateway (the multipart body, the size ceiling, the transfer quota, a client
 * gone mid-body) or by the files service, which answers a refusal only once it has rolled the
 * upload back. Anything else (no answer in time, the service gone, an unexpected failure) may
 * come after the service committed the file, so the bytes that moved count, as they would
 * for the stored file: the meter never lets an upload through uncounted.
 */
function storedNothing(error: unknown): boolean {
  return httpErrorOf(error, { method: "POST", path: "/file/upload", requestId: "" }).status < 500;
}

/**
 * The file routes on the files service, which authorizes every call (404
 * across organizations, 403 `token_read_only` and `organization_forbidden` on writes) and keeps
 * the plan's storage and file size limits. The gateway adds what only it can do: every call is
 * one public API call of the organization (429 `api_call_limit_exceeded` past the plan), and
 * the bytes that pass through it are its data transfer (403 `transfer_limit_exceeded`).
 *
 * The organization of a call: an API token's own; for a member's session, the organization of
 * the record (RecordsService.ResolveRecord, cached), where the user must be a member, else the
 * 404 `record_not_found` the service would answer. A call that names no record (row_id 0) is
 * charged to nobody; the service answers it `file_not_found`.
 */
export class FileOperations {
  constructor(private readonly deps: FileOperationsDeps) {}

  async storageCheck(
    rowId: bigint,
    fileSize: bigint,
    request: FileCall,
  ): Promise<Record<string, never>> {
    await this.charge(rowId, request);
    await this.deps.files.storageCheck({ rowId, fileSize }, request.call);
    return {};
  }

  async upload(
    rowId: bigint,
    fieldId: bigint,
    request: FileCall,
  ): Promise<Data<typeof FileUploadSchema>> {
    const organizationId = await this.charge(rowId, request);
    if (organizationId === undefined) throw new Error("an upload names a record");
    const meter = await this.deps.transfer.meter(organizationId, this.transferContext(request));
    // The upload's ceiling: the plan's per-file limit (the files service holds it to the
    // field's too), or the gateway's own where that is lower. A body declared longer than the
    // ceiling and its framing holds a file too large for the plan: 413 file_too_large before
    // it is read, whatever transfer is left (no later month would take it either).
    const ceiling = uploadCeiling(meter.plan.maxFileBytes, this.deps.uploadMaxBytes);
    const declared = request.ctx.request.length;
    if (declared !== undefined && declared > ceiling + MULTIPART_FRAMING_BYTES) {
      throw fileTooLarge();
    }
    // A body of known length holds all the transfer it can move (the file is never longer than
    // the body, nor than the ceiling) before a byte moves, or is refused at once: parallel
    // uploads near the allowance never each hold part of the room and all fail for want of the
    // rest. A chunked body is reserved block by block as it arrives. What does not move (the
    // framing) is given back when the transfer settles.
    if (declared) await meter.reserve(Math.min(declared, ceiling));
    const connection = this.deps.uploadClient();
    try {
      const response = await receiveUpload(request.ctx, {
        partName: UPLOAD_PART,
        maxBytes: ceiling,
        answerTimeoutMs: RPC_TIMEOUT_MS,
        hooks: {
          before: (bytes) => meter.admit(bytes, RESERVATION_BLOCK_BYTES),
          after: (bytes) => meter.count(bytes),
        },
        sink: ({ fileName, chunks, signal }) =>
          connection.client.uploadFile(
            uploadMessages({ rowId, fieldId, fileName }, chunks),
            streaming(request.call, signal),
          ),
      });
      await meter.settle();
      return { file: presentFileInfo(response.file) };
    } catch (error) {
      if (storedNothing(error)) {
        await meter.cancel();
      } else {
        await meter.settle();
      }
      throw error;
    } finally {
      connection.close();
    }
  }

  async serve(rowId: bigint, fieldId: bigint, request: FileCall): Promise<object> {
    await this.charge(rowId, request);
    await sendFile(request.ctx, {
      open: (range, signal) =>
        this.deps.files.serveFile(
          { rowId, fieldId, range: byteRangeOf(range) },
          streaming(request.call, signal),
        ),
      meter: (organizationId) =>
        this.deps.transfer.meter(organizationId, this.transferContext(request)),
      headerTimeoutMs: RPC_TIMEOUT_MS,
    });
    return {};
  }

  /** A signed link's download: no caller, the token is the authority; only transfer counts. */
  async serveSigned(token: string, call: CallOptions, ctx: GatewayContext): Promise<object> {
    const context: TransferContext = {
      caller: undefined,
      requestId: ctx.state.requestId,
      log: ctx.state.log,
    };
    await sendFile(ctx, {
      open: (range, signal) =>
        this.deps.files.serveSignedFile(
          { token, range: byteRangeOf(range) },
          streaming(call, signal),
        ),
      meter: (organizationId) =>
        this.deps.transfer.meter(organizationId, context, "file_not_found"),
      headerTimeoutMs: RPC_TIMEOUT_MS,
    });
    return {};
  }

  async url(
    rowId: bigint,
    fieldId: bigint,
    download: boolean,
    request: FileCall,
  ): Promise<Data<typeof FileUrlSchema>> {
    await this.charge(rowId, request);
    const response = await this.deps.files.createFileUrl(
      { rowId, fieldId, download },
      request.call,
    );
    if (!response.token) throw new Error("CreateFileUrl answered without a token");
    return {
      url: `${this.deps.publicBaseUrl}/file/signed/${encodeURIComponent(response.token)}`,
      expires_at: timeOf(response.expiresAt),
    };
  }

  async rename(
    rowId: bigint,
    fieldId: bigint,
    fileName: string,
    request: FileCall,
  ): Promise<Data<typeof FileRenameSchema>> {
    await this.charge(rowId, request);
    const response = await this.deps.files.renameFile({ rowId, fieldId, fileName }, request.call);
    return { file: presentFileInfo(response.file) };
  }

  async delete(
    rowId: bigint,
    fieldId: bigint,
    request: FileCall,
  ): Promise<Data<typeof FileDeleteSchema>> {
    await this.charge(rowId, request);
    const response = await this.deps.files.deleteFile({ rowId, fieldId }, request.call);
    return { file: presentFileInfo(response.file) };
  }

  async restore(
    rowId: bigint,
    fieldId: bigint,
    request: FileCall,
  ): Promise<Data<typeof FileRestoreSchema>> {
    await this.charge(rowId, request);
    const response = await this.deps.files.restoreFile({ rowId, fieldId }, request.call);
    return { file: presentFileInfo(response.file) };
  }

  /** Counts the call as one API call of its organization, which it returns (if it names one). */
  private async charge(rowId: bigint, { caller, ctx }: FileCall): Promise<bigint | undefined> {
    const { requestId } = ctx.state;
    let organizationId: bigint;
    if (caller.kind === "api_token") {
      organizationId = caller.organizationId;
    } else {
      if (rowId <= 0n) return undefined;
      organizationId = await this.deps.recordOrganizations.organizationOf(rowId, requestId);
    }
    await this.deps.quota.chargeOrganization(caller, organizationId, "record_not_found", requestId);
    return organizationId;
  }

  private transferContext({ caller, ctx }: FileCall): TransferContext {
    return { caller, requestId: ctx.state.requestId, log: ctx.state.log };
  }
}
