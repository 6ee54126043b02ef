import { Code, type ConnectError, domainError } from "@rowbase/kit";

/** Past the plan's max_file_bytes or the field's max_size (413). */
export function fileTooLarge(maxBytes: number): ConnectError {
  return domainError(Code.InvalidArgument, "file_too_large", { max_bytes: String(maxBytes) });
}

/** Past the plan's file_storage_bytes (403). */
export function storageLimitExceeded(): ConnectError {
  return domainError(Code.ResourceExhausted, "storage_limit_exceeded");
}

/**
 * A range that starts past the end of the file (or a reversed or empty one): the gateway
 * answers 416 with `Content-Range: bytes *\/<size>` from the metadata.
 */
export function rangeNotSatisfiable(size: number): ConnectError {
  return domainError(Code.OutOfRange, "range_not_satisfiable", { size: String(size) });
}
