import { Code, domainError } from "@rowbase/kit";

export function tableNameTaken() {
  return domainError(Code.AlreadyExists, "table_name_taken");
}

export function fieldNameTaken() {
  return domainError(Code.AlreadyExists, "field_name_taken");
}

/** The type pair has no conversion, or (records' answer) a stored value does not convert. */
export function fieldTypeChangeInvalid(metadata: Record<string, string> = {}) {
  return domainError(Code.FailedPrecondition, "field_type_change_invalid", metadata);
}

/** The table has as many fields as one may (MAX_FIELDS_PER_TABLE); an addition. */
export function fieldLimitExceeded() {
  return domainError(Code.ResourceExhausted, "field_limit_exceeded");
}

/** The organization holds as many databases as one may (MAX_DATABASES_PER_ORGANIZATION). */
export function databaseLimitExceeded() {
  return domainError(Code.ResourceExhausted, "database_limit_exceeded");
}

/** The database holds as many tables as one may (MAX_TABLES_PER_DATABASE); an addition. */
export function tableLimitExceeded() {
  return domainError(Code.ResourceExhausted, "table_limit_exceeded");
}

/** A form names a field of a read-only or file type, which no submission can write. */
export function formFieldNotAllowed() {
  return domainError(Code.InvalidArgument, "form_field_not_allowed");
}

/** The organization holds as many forms as its plan allows (`forms`). */
export function formLimitExceeded() {
  return domainError(Code.ResourceExhausted, "form_limit_exceeded");
}
