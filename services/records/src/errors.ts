import {
  Code,
  type ConnectError,
  domainError,
  mebibytes,
  PAGE_MAX_BYTES,
  RECORD_MAX_BYTES,
  validationFailed,
} from "@rowbase/kit";

/**
 * A write that would store records of more than RECORD_MAX_BYTES of values: an item per record,
 * keyed `data` (in a batch `records.N.data`).
 */
export function recordsTooLarge(keys: readonly string[]): ConnectError {
  const message = `the record's values come to more than ${mebibytes(RECORD_MAX_BYTES)}`;
  return validationFailed(keys.map((key) => ({ key, message, source: "body", code: "too_long" })));
}

/**
 * A batch update or delete whose records hold more than PAGE_MAX_BYTES of values (it reads them
 * whole, and an update answers them): 400 on `key`, asking for fewer at once.
 */
export function batchTooLarge(key: string, verb: "create" | "update" | "delete"): ConnectError {
  return validationFailed([
    {
      key,
      message: `the records hold more than ${mebibytes(PAGE_MAX_BYTES)} of values; ${verb} fewer at once`,
      source: "body",
      code: "too_long",
    },
  ]);
}

/** A list page whose records hold more than PAGE_MAX_BYTES of values. */
export function pageTooLarge(): ConnectError {
  return validationFailed([
    {
      key: "limit",
      message: `the page's records hold more than ${mebibytes(PAGE_MAX_BYTES)} of values; ask for fewer records`,
      source: "query",
      code: "too_long",
    },
  ]);
}

/** A missing table, one of another organization, or one outside the named database. */
export function tableNotFound(): ConnectError {
  return domainError(Code.NotFound, "table_not_found");
}

/** A missing record, or one of another table. */
export function recordNotFound(): ConnectError {
  return domainError(Code.NotFound, "record_not_found");
}

/**
 * A create past the plan's record limit. ResourceExhausted is the canonical code for a quota;
 * the gateway answers 403 from the reason, as for every plan limit but the monthly API calls.
 */
export function recordLimitExceeded(): ConnectError {
  return domainError(Code.ResourceExhausted, "record_limit_exceeded");
}

/**
 * A stored value that does not convert to a field's new type (catalog passes this on as its own
 * field_type_change_invalid). `row_ids`: a JSON array of a few offending rows; `count`: how many
 * values fail in all; `message`: the first problem.
 */
export function fieldTypeChangeInvalid(metadata: Record<string, string>): ConnectError {
  return domainError(Code.FailedPrecondition, "field_type_change_invalid", metadata);
}
