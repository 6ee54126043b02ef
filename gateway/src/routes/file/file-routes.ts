import type { Client } from "@connectrpc/connect";
import { type Cache, createDedicatedServiceClient, type EventBus } from "@rowbase/kit";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import type { ErrorCode } from "../../errors/error-table.js";
import type { ApiCallQuota } from "../../quota/api-call-quota.js";
import { RecordOrganizations } from "../../quota/record-organizations.js";
import { createTransferQuota } from "../../quota/transfer-quota.js";
import { localOnFailure } from "../../quota/unavailable-on-failure.js";
import type { RateLimitName } from "../../rate-limit/rate-limit-settings.js";
import { defineRoute, type Route, type RouteInput } from "../../routing/route.js";
import { type FileCall, FileOperations } from "./file-operations.js";
import {
  FileDeleteSchema,
  FileQuery,
  FileRenameQuery,
  FileRenameRequest,
  FileRenameSchema,
  FileRestoreSchema,
  FileUploadSchema,
  FileUrlQuery,
  FileUrlSchema,
  SignedFilePath,
  StorageCheckQuery,
  UPLOAD_PART,
} from "./file-schemas.js";

export interface FileRoutesDeps {
  files: Client<typeof FilesService>;
  /** `FILES_GRPC_URL`: each upload streams over a connection of its own to it. */
  filesUrl: string;
  /** Where a member's session call finds the organization of a record (ResolveRecord). */
  records: Client<typeof RecordsService>;
  /** The plans that the transfer is checked against. */
  organization: Client<typeof OrganizationService>;
  /** The shared cache: transfer counters, plans, records' organizations. */
  cache: Cache;
  /** Where TransferCounted goes. */
  bus: EventBus;
  /** The API-call quota the record routes count with. */
  quota: ApiCallQuota;
  internalSecret: string;
  /** `PUBLIC_BASE_URL`: where signed file URLs point. */
  publicBaseUrl: string;
  /** The absolute ceiling of an upload (`FILE_UPLOAD_MAX_BYTES`). */
  uploadMaxBytes: number;
}

const tags = ["Files"];

/** The per-token (and per-user) allowance of the public API, shared with the record routes. */
const rateLimits: RateLimitName[] = ["records_token", "records_user"];

const COMMON: ErrorCode[] = ["record_not_found", "api_call_limit_exceeded"];
const PAIR: ErrorCode[] = [...COMMON, "field_not_found", "field_not_file_type"];
const READ: ErrorCode[] = [...PAIR, "file_not_found"];
const WRITE: ErrorCode[] = [...PAIR, "file_not_found", "token_read_only", "organization_forbidden"];

const AUTH_DESCRIPTION =
  "Takes an API token (`read` may serve and ask for URLs, `read_write` may also write) or a " +
  "member's session. Each call counts toward the organization's monthly `api_calls_per_month`.";

const TRANSFER_DESCRIPTION =
  "The bytes count toward the organization's monthly `transfer_bytes_per_month`; past it, 403 " +
  "`transfer_limit_exceeded`.";

const SERVE_DESCRIPTION =
  "Answers the bytes with the content type sniffed when they were stored, `Content-Length`, a " +
  "strong `ETag` (`If-None-Match`: 304), `Accept-Ranges: bytes` (one `Range`: 206 with " +
  "`Content-Range`; several, or a malformed one, serve the whole file; past the end: 416), " +
  "`Content-Disposition` (`attachment` for active content such as HTML, SVG or scripts), " +
  "`X-Content-Type-Options: nosniff` and `Content-Security-Policy: default-src 'none'; sandbox`.";

function fileCall(input: RouteInput<"session_or_token", unknown, unknown, unknown>): FileCall {
  return { caller: input.caller, call: input.call, ctx: input.ctx };
}

/**
 * Files of records, addressed by (row_id, field_id), on the
 * files service. Upload takes multipart/form-data with one part named `file`, streamed through;
 * serve and the signed link answer the bytes themselves; the rest answer JSON envelopes.
 */
export function fileRoutes(deps: FileRoutesDeps): Route[] {
  const cache = localOnFailure(deps.cache);
  const files = new FileOperations({
    files: deps.files,
    uploadClient: () => createDedicatedServiceClient(FilesService, deps.filesUrl),
    quota: deps.quota,
    transfer: createTransferQuota({
      cache: deps.cache,
      bus: deps.bus,
      organization: deps.organization,
      internalSecret: deps.internalSecret,
    }),
    recordOrganizations: new RecordOrganizations(deps.records, cache, deps.internalSecret),
    publicBaseUrl: deps.publicBaseUrl,
    uploadMaxBytes: deps.uploadMaxBytes,
  });
  return [
    defineRoute({
      method: "POST",
      path: "/file/storage_check",
      operationId: "fileStorageCheck",
      summary: "Whether a file of this size would fit the plan's storage and file size limits",
      description: `${AUTH_DESCRIPTION} Part of the upload flow: a \`read\` token gets 403.`,
      tags,
      auth: "session_or_token",
      rateLimits,
      query: StorageCheckQuery,
      errors: [
        ...COMMON,
        "token_read_only",
        "organization_forbidden",
        "storage_limit_exceeded",
        "file_too_large",
      ],
      handle: (input) =>
        files.storageCheck(input.query.row_id, input.query.file_size, fileCall(input)),
    }),
    defineRoute({
      method: "POST",
      path: "/file/upload",
      operationId: "fileUpload",
      summary: "Store a file for the pair, replacing (soft-deleting) the previous one",
      description:
        `${AUTH_DESCRIPTION} The body is multipart/form-data with exactly one part, named ` +
        "`file`, streamed through as it arrives. Its filename becomes the file's label, never a " +
        "reason to refuse it: the last segment of a path, without control characters, `file` " +
        "when nothing is left (the content type is sniffed from the bytes). Past the plan's " +
        "`max_file_bytes` or the field's `max_size`: " +
        `413 \`file_too_large\`, and nothing is stored, whatever transfer is left. ` +
        `${TRANSFER_DESCRIPTION} A body with a \`Content-Length\` must fit the allowance whole, ` +
        "multipart framing included (at most the plan's `max_file_bytes`), or is refused before " +
        "it is read; a chunked body is counted as it arrives.",
      tags,
      auth: "session_or_token",
      rateLimits,
      query: FileQuery,
      multipartFile: UPLOAD_PART,
      response: FileUploadSchema,
      errors: [
        ...PAIR,
        "token_read_only",
        "organization_forbidden",
        "storage_limit_exceeded",
        "file_too_large",
        "transfer_limit_exceeded",
      ],
      handle: (input) => files.upload(input.query.row_id, input.query.field_id, fileCall(input)),
    }),
    defineRoute({
      method: "GET",
      path: "/file/serve",
      operationId: "fileServe",
      summary: "The pair's file: its bytes",
      description: `${AUTH_DESCRIPTION} ${SERVE_DESCRIPTION} ${TRANSFER_DESCRIPTION}`,
      tags,
      auth: "session_or_token",
      rateLimits,
      query: FileQuery,
      binary: true,
      errors: [...READ, "range_not_satisfiable", "transfer_limit_exceeded"],
      handle: async (input) => {
        await files.serve(input.query.row_id, input.query.field_id, fileCall(input));
        return {};
      },
    }),
    defineRoute({
      method: "GET",
      path: "/file/url",
      operationId: "fileUrl",
      summary: "A signed link to the pair's file, usable without a bearer token for an hour",
      description:
        `${AUTH_DESCRIPTION} The link names one stored file: it dies when it expires, when the ` +
        "file is replaced or deleted (a restore does not revive it) and with its record; a " +
        "rename keeps it. `download=true` serves it as an attachment.",
      tags,
      auth: "session_or_token",
      rateLimits,
      query: FileUrlQuery,
      response: FileUrlSchema,
      errors: READ,
      handle: (input) =>
        files.url(input.query.row_id, input.query.field_id, input.query.download, fileCall(input)),
    }),
    defineRoute({
      method: "GET",
      path: "/file/signed/:token",
      operationId: "fileSigned",
      summary: "The file a signed link names: its bytes, without a bearer token",
      description:
        `The token is the authority: a tampered, expired or dead one answers 404 ` +
        `\`file_not_found\` (so does one whose field is gone), and one whose record, table or ` +
        `organization is gone 404 \`record_not_found\`. ` +
        `${SERVE_DESCRIPTION} ${TRANSFER_DESCRIPTION}`,
      tags,
      auth: "none",
      params: SignedFilePath,
      binary: true,
      errors: [
        "file_not_found",
        "record_not_found",
        "range_not_satisfiable",
        "transfer_limit_exceeded",
      ],
      handle: async (input) => {
        await files.serveSigned(input.params.token, input.call, input.ctx);
        return {};
      },
    }),
    defineRoute({
      method: "POST",
      path: "/file/rename",
      operationId: "fileRename",
      summary: "Rename the pair's file",
      description: `${AUTH_DESCRIPTION} Only the name changes (the bytes and the ETag do not).`,
      tags,
      auth: "session_or_token",
      rateLimits,
      query: FileRenameQuery,
      body: FileRenameRequest,
      response: FileRenameSchema,
      errors: WRITE,
      handle: (input) =>
        files.rename(
          input.query.row_id,
          input.query.field_id,
          input.body.file_name,
          fileCall(input),
        ),
    }),
    defineRoute({
      method: "POST",
      path: "/file/delete",
      operationId: "fileDelete",
      summary: "Delete the pair's file; it can be restored for 30 days",
      description: AUTH_DESCRIPTION,
      tags,
      auth: "session_or_token",
      rateLimits,
      query: FileQuery,
      response: FileDeleteSchema,
      errors: WRITE,
      handle: (input) => files.delete(input.query.row_id, input.query.field_id, fileCall(input)),
    }),
    defineRoute({
      method: "POST",
      path: "/file/restore",
      operationId: "fileRestore",
      summary: "Bring back the pair's most recently deleted file",
      description:
        `${AUTH_DESCRIPTION} A live file, if any, is deleted in its place. A deleted record's ` +
        "files went with it and cannot be restored (404 `record_not_found`).",
      tags,
      auth: "session_or_token",
      rateLimits,
      query: FileQuery,
      response: FileRestoreSchema,
      errors: WRITE,
      handle: (input) => files.restore(input.query.row_id, input.query.field_id, fileCall(input)),
    }),
  ];
}
