import type { JsonObject } from "@bufbuild/protobuf";
import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import { Code, ConnectError, callAs } from "@rowbase/kit";
import type { FileInfo } from "@rowbase/proto/rowbase/files/v1/files_pb";
import type { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import type { RecordFiles } from "./domain/record-output.js";
import type { SchemaField } from "./table-schema.js";

const NO_FILES: RecordFiles = new Map();

function timeOf(timestamp: Timestamp | undefined): string | null {
  return timestamp ? timestampDate(timestamp).toISOString() : null;
}

/**
 * A FileInfo as a file field shows it, as the file routes do: the REST keys, integers as JSON
 * numbers (ids and sizes stay below 2^53), times in RFC 3339 with milliseconds, `deleted_at`
 * null for a live file.
 */
export function fileValueOf(file: FileInfo): JsonObject {
  return {
    row_id: Number(file.rowId),
    field_id: Number(file.fieldId),
    file_name: file.fileName,
    content_type: file.contentType,
    size: Number(file.size),
    sha256: file.sha256,
    created_at: timeOf(file.createdAt),
    updated_at: timeOf(file.updatedAt),
    deleted_at: timeOf(file.deletedAt),
  };
}

/**
 * The values of file fields, from FilesService.ListRecordFiles (asked as the records service):
 * one call per response, for all its rows, and none when the response shows no file field or no
 * row. Without a files service (FILES_GRPC_URL unset) every file field shows null. Files being
 * unreachable fails the call with Unavailable (503) rather than showing a wrong null.
 */
export class FileValues {
  constructor(
    private readonly files: Client<typeof FilesService> | undefined,
    private readonly internalSecret: string,
  ) {}

  async of(
    fields: readonly SchemaField[],
    rowIds: readonly bigint[],
    requestId = "",
  ): Promise<RecordFiles> {
    const fileFields = new Set(fields.filter((f) => f.type === "file").map((f) => f.id));
    if (!this.files || fileFields.size === 0 || rowIds.length === 0) return NO_FILES;
    let listed: FileInfo[];
    try {
      const response = await this.files.listRecordFiles(
        { rowIds: [...new Set(rowIds)] },
        await callAs(this.internalSecret, { kind: "service", service: "records" }, requestId),
      );
      listed = response.files;
    } catch (error) {
      if (
        error instanceof ConnectError &&
        (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
      ) {
        throw new ConnectError("files service unavailable", Code.Unavailable);
      }
      throw new Error("FilesService.ListRecordFiles failed", { cause: error });
    }
    const byRow = new Map<bigint, Map<string, JsonObject>>();
    for (const file of listed) {
      const fieldId = file.fieldId.toString();
      if (!fileFields.has(fieldId)) continue;
      let ofRow = byRow.get(file.rowId);
      if (!ofRow) {
        ofRow = new Map();
        byRow.set(file.rowId, ofRow);
      }
      ofRow.set(fieldId, fileValueOf(file));
    }
    return byRow;
  }
}
