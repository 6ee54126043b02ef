import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type FileInfo, FileInfoSchema } from "@rowbase/proto/rowbase/files/v1/files_pb";
import type { StoredFile } from "./db/stored-file.js";

export function toFileInfo(file: StoredFile): FileInfo {
  return create(FileInfoSchema, {
    rowId: file.rowId,
    fieldId: file.fieldId,
    fileName: file.fileName,
    contentType: file.contentType,
    size: BigInt(file.size),
    sha256: file.sha256,
    createdAt: timestampFromDate(file.createdAt),
    updatedAt: timestampFromDate(file.updatedAt),
    ...(file.deletedAt ? { deletedAt: timestampFromDate(file.deletedAt) } : {}),
  });
}
