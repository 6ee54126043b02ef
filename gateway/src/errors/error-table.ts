import {
  Code,
  ConnectError,
  errorInfoOf,
  isUnreachableDependency,
  RETRY_AFTER_METADATA,
  VALIDATION_REASON,
} from "@rowbase/kit";
import { RateLimiterRes } from "rate-limiter-flexible";
import {
  isValidationCode,
  type ValidationEnvelope,
  ValidationFailed,
  type ValidationItem,
  validationEnvelope,
} from "./validation-failed.js";

/**
 * The one table from domain error code (the ErrorInfo reason a service or the gateway throws)
 * to HTTP status, as docs/errors.md lists them. A reason missing here is a bug and answers 500,
 * so a new code cannot slip out with a guessed status.
 */
export const ERROR_STATUS = {
  email_not_verified: 400,
  email_already_exists: 400,
  invalid_verification_code: 400,
  idp_auth_error: 400,
  invite_already_exists: 400,
  cannot_transfer_to_self: 400,
  transfer_verification_code_expired: 400,
  organization_slug_taken: 400,
  field_name_taken: 400,
  table_name_taken: 400,
  invalid_field_options: 400,
  field_type_change_invalid: 400,
  field_not_file_type: 400,
  form_field_not_allowed: 400,
  already_member: 400,
  /** A webhook URL naming an address webhooks may not reach (webhooks service). */
  webhook_url_forbidden: 400,
  /**
   * A request Node's HTTP parser refuses: a malformed request line, bad header characters, a
   * bad Content-Length or Transfer-Encoding (gateway/src/http/client-error.ts); an addition.
   */
  malformed_request: 400,
  unauthorized: 401,
  invalid_credentials: 401,
  invalid_refresh_token: 401,
  organization_limit_exceeded: 403,
  organization_forbidden: 403,
  token_read_only: 403,
  record_limit_exceeded: 403,
  form_limit_exceeded: 403,
  storage_limit_exceeded: 403,
  member_limit_exceeded: 403,
  /** An organization holds at most 1000 databases (catalog); an addition. */
  database_limit_exceeded: 403,
  /** A database holds at most 1000 tables (catalog); an addition. */
  table_limit_exceeded: 403,
  /** A table has at most 500 fields (catalog); an addition. */
  field_limit_exceeded: 403,
  transfer_limit_exceeded: 403,
  /** Past the plan's `webhooks` (webhooks service). */
  webhook_limit_exceeded: 403,
  api_token_not_found: 404,
  database_not_found: 404,
  field_not_found: 404,
  form_not_found: 404,
  organization_not_found: 404,
  invite_not_found: 404,
  member_not_found: 404,
  table_not_found: 404,
  record_not_found: 404,
  file_not_found: 404,
  webhook_not_found: 404,
  delivery_not_found: 404,
  not_found: 404,
  method_not_allowed: 405,
  /** A change cursor older than the change log's retention (records); an addition. */
  cursor_expired: 410,
  /**
   * Headers or a body that stopped arriving, or a body far too slow
   * (gateway/src/http/request-body-timeouts.ts); an addition.
   */
  request_timeout: 408,
  payload_too_large: 413,
  file_too_large: 413,
  /** A Range that starts past the end of a served file (files service); an addition. */
  range_not_satisfiable: 416,
  too_many_requests: 429,
  /** A request line and headers over Node's 16 KiB (gateway/src/http/client-error.ts); an addition. */
  request_header_too_large: 431,
  api_call_limit_exceeded: 429,
  internal_error: 500,
  service_unavailable: 503,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

/**
 * ErrorInfo metadata keys that become response headers, for the statuses that need them:
 * `Retry-After` of a 429, and of a 503 whose service said when (a write of a table whose
 * values are being converted: kit's grpc-server).
 */
export { RETRY_AFTER_METADATA };
export const ALLOW_METADATA = "allow";
/**
 * The `WWW-Authenticate` value of a 401, saying why the credential was refused
 * (gateway/src/auth/authenticate.ts writes it).
 */
export const WWW_AUTHENTICATE_METADATA = "www_authenticate";
/** The size of the file a 416 refers to, answered as `Content-Range: bytes *\/<size>`. */
export const SIZE_METADATA = "size";

/** Seconds a client is told to wait on a 429 whose source did not say. */
const DEFAULT_RETRY_AFTER_SECONDS = 60;

/**
 * Codes whose envelope `data` is not empty: which ErrorInfo metadata key holds it, JSON-encoded
 * (metadata values are strings). Anything else in metadata never reaches the client.
 */
const ERROR_DATA: Partial<Record<ErrorCode, string>> = {
  invalid_field_options: "errors",
  service_unavailable: "failing",
};

/**
 * The `WWW-Authenticate` of a 401 that did not say why itself: a service refusing a credential
 * the gateway let through, and the two 401s of the sign-in routes.
 */
const UNAUTHORIZED_BY_CODE: Partial<Record<ErrorCode, string>> = {
  unauthorized:
    'Bearer realm="rowbase", error="invalid_token", error_description="the credential is not accepted on this route"',
  invalid_credentials:
    'Bearer realm="rowbase", error_description="the e-mail address or the password is wrong"',
  invalid_refresh_token:
    'Bearer realm="rowbase", error_description="the refresh token is unknown, expired or already used"',
};

export interface DomainEnvelope {
  message: string;
  data: Record<string, unknown>;
}

export interface HttpErrorResponse {
  status: number;
  body: DomainEnvelope | ValidationEnvelope;
  headers: Record<string, string>;
  /** How loudly the error middleware logs it: 5xx are ours to look at, 4xx are the client's. */
  log: "none" | "warn" | "error";
}

export interface RequestLine {
  method: string;
  path: string;
  requestId: string;
}

export function isErrorCode(reason: string): reason is ErrorCode {
  return Object.hasOwn(ERROR_STATUS, reason);
}

/** Maps anything a request can throw to its HTTP status, envelope and headers. */
export function httpErrorOf(error: unknown, request: RequestLine): HttpErrorResponse {
  if (error instanceof ValidationFailed) {
    return validation(request, error.items);
  }
  if (error instanceof RateLimiterRes) {
    return domain("too_many_requests", { [RETRY_AFTER_METADATA]: retryAfterOf(error) });
  }
  const info = errorInfoOf(error);
  if (info) {
    if (info.reason === VALIDATION_REASON) {
      return validation(request, parseItems(info.metadata.extra));
    }
    if (isErrorCode(info.reason) && info.reason !== "internal_error") {
      return domain(info.reason, info.metadata);
    }
  }
  if (error instanceof ConnectError) {
    switch (error.code) {
      case Code.Unavailable:
      case Code.DeadlineExceeded:
        return domain("service_unavailable", {});
      case Code.Unauthenticated:
        return domain("unauthorized", {});
    }
  }
  const status = httpStatusOf(error);
  if (status === 400) return validation(request, []);
  if (status === 401) return domain("unauthorized", {});
  if (status === 404) return domain("not_found", {});
  if (status === 405) return domain("method_not_allowed", {});
  if (status === 413) return domain("payload_too_large", {});
  // Redis or a connection cut under the gateway itself: a dependency away, not a fault.
  if (isUnreachableDependency(error)) return domain("service_unavailable", {});
  return internal(request);
}

/** The seconds a RateLimiterRes says to wait, at least 1. */
export function retryAfterOf(res: RateLimiterRes): string {
  return String(Math.max(1, Math.ceil(res.msBeforeNext / 1000)));
}

function domain(code: ErrorCode, metadata: Record<string, string>): HttpErrorResponse {
  const status = ERROR_STATUS[code];
  const headers: Record<string, string> = {};
  if (status === 429) {
    const seconds = Number(metadata[RETRY_AFTER_METADATA]);
    headers["retry-after"] = String(
      Number.isInteger(seconds) && seconds > 0 ? seconds : DEFAULT_RETRY_AFTER_SECONDS,
    );
  }
  if (status === 503 && /^[1-9][0-9]{0,4}$/.test(metadata[RETRY_AFTER_METADATA] ?? "")) {
    headers["retry-after"] = metadata[RETRY_AFTER_METADATA]!;
  }
  if (status === 401) {
    headers["www-authenticate"] =
      metadata[WWW_AUTHENTICATE_METADATA] ?? UNAUTHORIZED_BY_CODE[code] ?? 'Bearer realm="rowbase"';
  }
  if (status === 405 && metadata[ALLOW_METADATA]) headers.allow = metadata[ALLOW_METADATA];
  if (status === 416 && /^[0-9]{1,19}$/.test(metadata[SIZE_METADATA] ?? "")) {
    headers["content-range"] = `bytes */${metadata[SIZE_METADATA]}`;
  }
  const dataKey = ERROR_DATA[code];
  const data = dataKey ? jsonObjectOf(dataKey, metadata[dataKey]) : {};
  return {
    status,
    body: { message: code, data },
    headers,
    log: status === 503 ? "warn" : "none",
  };
}

function validation(request: RequestLine, items: ValidationItem[]): HttpErrorResponse {
  return {
    status: 400,
    body: validationEnvelope(request.method, request.path, items),
    headers: {},
    log: "none",
  };
}

function internal(request: RequestLine): HttpErrorResponse {
  return {
    status: 500,
    body: { message: "internal_error", data: { request_id: request.requestId } },
    headers: {},
    log: "error",
  };
}

/** A Koa/http-errors style status (e.g. from a library's `ctx.throw`), if the error has one. */
function httpStatusOf(error: unknown): number | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const status = (error as { status?: unknown }).status;
  return typeof status === "number" ? status : undefined;
}

function jsonObjectOf(key: string, raw: string | undefined): Record<string, unknown> {
  if (raw === undefined) return {};
  try {
    return { [key]: JSON.parse(raw) as unknown };
  } catch {
    return {};
  }
}

const SOURCES = new Set(["body", "query", "path", "header"]);

function parseItems(raw: string | undefined): ValidationItem[] {
  if (raw === undefined) return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    if (!Array.isArray(parsed)) return [];
    return parsed.flatMap((item: unknown) => {
      if (typeof item !== "object" || item === null) return [];
      const { key, message, source, code } = item as Record<string, unknown>;
      if (typeof key !== "string" || typeof message !== "string") return [];
      return [
        {
          key,
          message,
          source: typeof source === "string" && SOURCES.has(source) ? source : "body",
          code: isValidationCode(code) ? code : "invalid_value",
        } as ValidationItem,
      ];
    });
  } catch {
    return [];
  }
}
