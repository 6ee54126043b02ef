import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type ErrorInfo, ErrorInfoSchema } from "@rowbase/proto/google/rpc/error_details_pb";

export { Code, ConnectError };

/**
 * ErrorInfo metadata of a refusal to try again later (429, 503): the seconds to wait, which the
 * gateway answers as `Retry-After`.
 */
export const RETRY_AFTER_METADATA = "retry_after";

/** The ErrorInfo domain of every Rowbase error. */
export const ERROR_DOMAIN = "rowbase";

/**
 * A domain failure: a canonical gRPC code plus the contract's error code (`database_not_found`)
 * as the ErrorInfo reason, which the gateway turns into an HTTP status and envelope.
 */
export function domainError(
  code: Code,
  reason: string,
  metadata: Record<string, string> = {},
): ConnectError {
  const info = create(ErrorInfoSchema, { reason, domain: ERROR_DOMAIN, metadata });
  return new ConnectError(reason, code, undefined, [{ desc: ErrorInfoSchema, value: info }]);
}

/**
 * The reason of a request refused key by key; the gateway turns it into its 400 validation
 * envelope (`status_code`, `detail`, `extra`) rather than a domain envelope.
 */
export const VALIDATION_REASON = "validation_failed";

/** Where a refused value came from, as the validation envelope names it. */
export type ValidationSource = "body" | "query" | "path" | "header";

/**
 * What kind of problem a validation item is, for programs to branch on (the message is for
 * people): a value missing, a key not allowed, a value of the wrong JSON type, a value of the
 * right type that is not allowed (a choice, a format), a text or list too short or too long, a
 * number or date out of its range, a `where`/`sort`/`fields` text that does not parse, a field
 * or row named that does not exist, a value that cannot be written.
 */
export const VALIDATION_CODES = [
  "required",
  "unknown_key",
  "invalid_type",
  "invalid_value",
  "too_short",
  "too_long",
  "out_of_range",
  "invalid_syntax",
  "not_found",
  "read_only",
] as const;

export type ValidationCode = (typeof VALIDATION_CODES)[number];

/** One item of the validation envelope's `extra`. */
export interface ValidationItem {
  key: string;
  message: string;
  source: ValidationSource;
  code: ValidationCode;
}

/**
 * A request refused key by key: ErrorInfo metadata `extra` carries the items as JSON. An array
 * rather than rest parameters, since a write of many records can fail on more keys than a
 * spread call takes arguments.
 */
export function validationFailed(items: readonly ValidationItem[]): ConnectError {
  return domainError(Code.InvalidArgument, VALIDATION_REASON, { extra: JSON.stringify(items) });
}

/**
 * A text from a request body as it will be stored, trimmed; or, if `problemOf` (a rule such as
 * `nameProblem`) finds something wrong with the trimmed text, the validation failure keyed
 * `key` that says what.
 */
export function trimmedOrRefused(
  raw: string,
  key: string,
  problemOf: (value: string) => string | undefined,
): string {
  const value = raw.trim();
  const problem = problemOf(value);
  if (problem) {
    throw validationFailed([
      { key, message: problem, source: "body", code: textProblemCode(value, problem) },
    ]);
  }
  return value;
}

/** The ErrorInfo carried by an error, if it is a Rowbase domain error. */
export function errorInfoOf(error: unknown): ErrorInfo | undefined {
  if (!(error instanceof ConnectError)) return undefined;
  return error.findDetails(ErrorInfoSchema).find((info) => info.domain === ERROR_DOMAIN);
}

/**
 * A failed call to another service, as this service's caller should see it: the other service
 * unreachable (or past its deadline) is Unavailable (503), anything unexpected an internal error
 * with the cause logged.
 */
export function upstreamFailure(what: string, error: unknown): Error {
  if (
    error instanceof ConnectError &&
    (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
  ) {
    return new ConnectError(`${what}: service unavailable`, Code.Unavailable);
  }
  return new Error(`${what} failed`, { cause: error });
}

/**
 * The code of a text rule's problem (a name, a description, a slug), from the text it refused:
 * an empty text is too short, a text refused for its number of characters is too long, and
 * anything else (a control character, a pattern) is an invalid value.
 */
export function textProblemCode(text: string, problem: string): ValidationCode {
  if (text.length === 0) return "too_short";
  if (/\bcharacters\b/.test(problem) && /\b(at most|1-\d+)\b/.test(problem)) return "too_long";
  return "invalid_value";
}
