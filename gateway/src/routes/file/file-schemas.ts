import { FILE_NAME_MAX_LENGTH, fileNameProblem } from "@rowbase/kit/field-types";
import { z } from "zod";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { CONTROL_CHARACTER_CLASS, MAX_ID, queryId, refusing } from "../../validation/fields.js";
import { givenOnce } from "../../validation/query-values.js";

/**
 * Parameters, bodies and answers of the file routes (docs/routes/files.md). A file
 * is addressed by the pair (row_id, field_id).
 */

/** The largest file size a query can name: ids and sizes stay below 2^53, as JSON numbers. */
export const MAX_FILE_SIZE_PARAMETER = Number.MAX_SAFE_INTEGER;

/** The one part an upload carries. */
export const UPLOAD_PART = "file";

/**
 * A whole number in the query string in [min, max], digits only; `fallback` when absent (the
 * default sits inside the preprocess step so that the document shows the parameter optional).
 */
function queryWholeNumber(min: number, max: number, message: string, fallback?: number) {
  const number = z.number().int({ error: message }).min(min, message).max(max, message);
  return z.preprocess(
    (value, ctx) => {
      if (!givenOnce(value, ctx)) return value;
      if (typeof value === "string") {
        if (/^[0-9]{1,16}$/.test(value)) return Number(value);
        ctx.addIssue({ code: "custom", message, input: value });
      }
      return value;
    },
    fallback === undefined ? number : number.default(fallback),
  );
}

/** `true`/`false` (or `1`/`0`) in the query string; absent is false. */
const queryBoolean = z.preprocess(
  (value, ctx) => {
    if (!givenOnce(value, ctx)) return value;
    if (typeof value !== "string") return value;
    const lower = value.toLowerCase();
    if (lower === "true" || lower === "1") return true;
    if (lower === "false" || lower === "0") return false;
    ctx.addIssue({ code: "custom", message: "must be true or false", input: value });
    return value;
  },
  z.boolean({ error: "must be true or false" }).default(false),
);

const rowId = queryId.describe("The record");
const fieldId = queryId.describe("The record's file field");

/**
 * Rename's parameters are optional with default 0, for clients written against that form;
 * 0 names no file, which the files service answers 404 `file_not_found`.
 */
function renameId(description: string) {
  const message = `must be an integer between 0 and ${MAX_ID}`;
  return queryWholeNumber(0, MAX_ID, message, 0)
    .transform((value) => BigInt(value))
    .describe(description);
}

/** The pair of the serve, url, delete, restore and upload routes. */
export const FileQuery = z.strictObject({ row_id: rowId, field_id: fieldId });

export const FileRenameQuery = z.strictObject({
  row_id: renameId("The record (0, the default, names no file)"),
  field_id: renameId("The record's file field (0, the default, names no file)"),
});

export const StorageCheckQuery = z.strictObject({
  row_id: rowId,
  file_size: queryWholeNumber(
    0,
    MAX_FILE_SIZE_PARAMETER,
    `must be an integer between 0 and ${MAX_FILE_SIZE_PARAMETER}`,
  )
    .transform((value) => BigInt(value))
    .describe("Bytes of the file about to be uploaded"),
});

export const FileUrlQuery = z.strictObject({
  row_id: rowId,
  field_id: fieldId,
  download: queryBoolean.describe(
    "`true`: the link serves the file as an attachment (a download) instead of inline",
  ),
});

/** The token of a signed file URL, as `GET /file/url` handed it out. */
export const SignedFilePath = z.strictObject({
  token: z
    .string()
    .min(1, "is required")
    .max(1024, "must be at most 1024 characters")
    .describe("The opaque signed token of a URL from `GET /file/url`"),
});

/**
 * The rule below as a pattern, for the document only (the route asks `fileNameProblem`): no
 * separator, control or bidirectional control character (Unicode's Bidi_Control set), and not
 * blank, `.` or `..` once trimmed.
 */
const FILE_NAME_PATTERN = `^(?!\\s*\\.{0,2}\\s*$)[^/\\\\${CONTROL_CHARACTER_CLASS}]+$`;

/** A file's new name, trimmed, by the rule the files service applies too (`fileNameProblem`). */
export const fileName = z
  .string()
  .trim()
  .superRefine(refusing(fileNameProblem))
  .meta({ minLength: 1, maxLength: FILE_NAME_MAX_LENGTH, pattern: FILE_NAME_PATTERN })
  .describe(
    `The file's new name: 1-${FILE_NAME_MAX_LENGTH} characters once trimmed, at least one ` +
      "visible, no '/', '\\' or control characters, not '.' or '..'",
  );

export const FileRenameRequest = requestBody(
  "FileRenameRequest",
  z.strictObject({ file_name: fileName }),
);

/** Response `data` of the file routes; the envelopes take their published schema names. */

const time = z.iso.datetime();

export const FileInfoSchema = responseData(
  "FileInfo",
  z.object({
    row_id: z.number().int(),
    field_id: z.number().int(),
    file_name: z.string(),
    content_type: z
      .string()
      .describe("Sniffed from the bytes when the file was stored, not taken from the client"),
    size: z.number().int().min(0).describe("Bytes"),
    sha256: z.string().describe("Lower-case hex SHA-256 of the bytes; the ETag when served"),
    created_at: time,
    updated_at: time,
    deleted_at: time
      .nullable()
      .describe("Set while the file is deleted (or replaced); it can be restored for 30 days"),
  }),
);

const fileOnly = () => z.object({ file: FileInfoSchema });

export const FileUploadSchema = responseData("FileUpload", fileOnly());
export const FileRenameSchema = responseData("FileRename", fileOnly());
export const FileDeleteSchema = responseData("FileDelete", fileOnly());
export const FileRestoreSchema = responseData("FileRestore", fileOnly());

export const FileUrlSchema = responseData(
  "FileUrl",
  z.object({
    url: z.string().describe("Absolute; serves the file without a bearer token until `expires_at`"),
    expires_at: time,
  }),
);
