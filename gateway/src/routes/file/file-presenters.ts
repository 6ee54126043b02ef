import type { FileInfo } from "@rowbase/proto/rowbase/files/v1/files_pb";
import type { z } from "zod";
import { countOf, idOf, optionalTimeOf, required, timeOf } from "../../presentation/wire-values.js";
import type { FileInfoSchema } from "./file-schemas.js";

/** A file's metadata as the REST API writes it; `deleted_at` is null while it is live. */
export function presentFileInfo(file: FileInfo | undefined): z.output<typeof FileInfoSchema> {
  const f = required(file, "file");
  return {
    row_id: idOf(f.rowId),
    field_id: idOf(f.fieldId),
    file_name: f.fileName,
    content_type: f.contentType,
    size: countOf(f.size),
    sha256: f.sha256,
    created_at: timeOf(f.createdAt),
    updated_at: timeOf(f.updatedAt),
    deleted_at: optionalTimeOf(f.deletedAt),
  };
}
