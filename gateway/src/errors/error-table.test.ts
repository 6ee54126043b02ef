import { Code, ConnectError, domainError, validationFailed } from "@rowbase/kit";
import { RateLimiterRes } from "rate-limiter-flexible";
import { describe, expect, it } from "vitest";
import { unauthorized } from "../auth/authenticate.js";
import { ERROR_STATUS, httpErrorOf } from "./error-table.js";
import { ValidationFailed } from "./validation-failed.js";

const request = { method: "POST", path: "/auth/login", requestId: "req-1" };

/** The statuses of docs/errors.md, transcribed independently of the table. */
const CONTRACT: Record<number, string[]> = {
  400: [
    "email_not_verified",
    "email_already_exists",
    "invalid_verification_code",
    "idp_auth_error",
    "invite_already_exists",
    "cannot_transfer_to_self",
    "transfer_verification_code_expired",
    "organization_slug_taken",
    "field_name_taken",
    "table_name_taken",
    "invalid_field_options",
    "field_type_change_invalid",
    "field_not_file_type",
    "already_member",
    "form_field_not_allowed",
    /** An addition: a request Node's HTTP parser refuses (http/client-error.ts). */
    "malformed_request",
    "webhook_url_forbidden",
  ],
  401: ["unauthorized", "invalid_credentials", "invalid_refresh_token"],
  403: [
    "organization_limit_exceeded",
    "organization_forbidden",
    "token_read_only",
    "record_limit_exceeded",
    "storage_limit_exceeded",
    "member_limit_exceeded",
    "transfer_limit_exceeded",
    "form_limit_exceeded",
    /** An addition: an organization holds at most 1000 databases (catalog). */
    "database_limit_exceeded",
    /** An addition: a database holds at most 1000 tables (catalog). */
    "table_limit_exceeded",
    /** An addition: a table has at most 500 fields (catalog). */
    "field_limit_exceeded",
    "webhook_limit_exceeded",
  ],
  404: [
    "api_token_not_found",
    "database_not_found",
    "field_not_found",
    "organization_not_found",
    "invite_not_found",
    "member_not_found",
    "table_not_found",
    "record_not_found",
    "file_not_found",
    "webhook_not_found",
    "delivery_not_found",
    "form_not_found",
    "not_found",
  ],
  405: ["method_not_allowed"],
  /** An addition: a change cursor older than the change log's retention. */
  410: ["cursor_expired"],
  /** An addition: headers or a body that stopped arriving (http/request-body-timeouts.ts). */
  408: ["request_timeout"],
  413: ["payload_too_large", "file_too_large"],
  /** File serving supports HTTP Range; a range past the end is 416. */
  416: ["range_not_satisfiable"],
  429: ["too_many_requests", "api_call_limit_exceeded"],
  /** An addition: what Node's HTTP parser refuses as too long (http/client-error.ts). */
  431: ["request_header_too_large"],
  503: ["service_unavailable"],
};

describe("the error table", () => {
  it("gives every contract code its HTTP status and the domain envelope", () => {
    for (const [status, codes] of Object.entries(CONTRACT)) {
      for (const code of codes) {
        // The gRPC code is deliberately unrelated: the reason alone decides.
        const response = httpErrorOf(domainError(Code.FailedPrecondition, code), request);
        expect({ code, status: response.status }).toEqual({ code, status: Number(status) });
        expect(response.body).toEqual({ message: code, data: {} });
      }
    }
  });

  it("has no code the contract does not list (besides internal_error)", () => {
    const listed = new Set([...Object.values(CONTRACT).flat(), "internal_error"]);
    expect(Object.keys(ERROR_STATUS).filter((code) => !listed.has(code))).toEqual([]);
  });

  it("sets Retry-After on 429: from the error's metadata, else a default", () => {
    const limited = httpErrorOf(
      domainError(Code.ResourceExhausted, "too_many_requests", { retry_after: "17" }),
      request,
    );
    expect(limited.status).toBe(429);
    expect(limited.headers["retry-after"]).toBe("17");
    const quota = httpErrorOf(
      domainError(Code.ResourceExhausted, "api_call_limit_exceeded"),
      request,
    );
    expect(Number(quota.headers["retry-after"])).toBeGreaterThan(0);
  });

  it("sets Retry-After on a 503 whose service said when, and on no other 503", () => {
    const busy = httpErrorOf(
      domainError(Code.Unavailable, "service_unavailable", { retry_after: "5" }),
      request,
    );
    expect(busy).toMatchObject({
      status: 503,
      body: { message: "service_unavailable", data: {} },
      headers: { "retry-after": "5" },
    });
    expect(httpErrorOf(new ConnectError("away", Code.Unavailable), request).headers).toEqual({});
    const nonsense = domainError(Code.Unavailable, "service_unavailable", { retry_after: "-1" });
    expect(httpErrorOf(nonsense, request).headers).toEqual({});
  });

  it("answers a raw RateLimiterRes as 429 with the seconds to wait, rounded up", () => {
    const response = httpErrorOf(new RateLimiterRes(0, 1_200, 11, false), request);
    expect(response.status).toBe(429);
    expect(response.body).toEqual({ message: "too_many_requests", data: {} });
    expect(response.headers["retry-after"]).toBe("2");
  });

  it("adds WWW-Authenticate to 401 and Allow to 405", () => {
    // A refusal says why (gateway/src/auth writes it); a service's 401 gets a general reason.
    expect(httpErrorOf(unauthorized("api_token_refused"), request).headers).toEqual({
      "www-authenticate":
        'Bearer realm="rowbase", error="invalid_token", error_description="API tokens are not accepted on this route; it takes a session token"',
    });
    expect(httpErrorOf(domainError(Code.Unauthenticated, "unauthorized"), request).headers).toEqual(
      {
        "www-authenticate":
          'Bearer realm="rowbase", error="invalid_token", error_description="the credential is not accepted on this route"',
      },
    );
    expect(
      httpErrorOf(domainError(Code.Unauthenticated, "invalid_credentials"), request).headers[
        "www-authenticate"
      ],
    ).toMatch(/^Bearer realm="rowbase", error_description=/);
    const notAllowed = httpErrorOf(
      domainError(Code.Unimplemented, "method_not_allowed", { allow: "POST, OPTIONS" }),
      request,
    );
    expect(notAllowed.headers).toEqual({ allow: "POST, OPTIONS" });
  });

  it("adds Content-Range with the file's size to 416", () => {
    const response = httpErrorOf(
      domainError(Code.OutOfRange, "range_not_satisfiable", { size: "1234" }),
      request,
    );
    expect(response.status).toBe(416);
    expect(response.body).toEqual({ message: "range_not_satisfiable", data: {} });
    expect(response.headers).toEqual({ "content-range": "bytes */1234" });
    const unsized = httpErrorOf(domainError(Code.OutOfRange, "range_not_satisfiable"), request);
    expect(unsized.headers).toEqual({});
  });

  it("passes only the declared metadata on as data", () => {
    const options = httpErrorOf(
      domainError(Code.InvalidArgument, "invalid_field_options", {
        errors: JSON.stringify([{ key: "options.decimals", message: "must be 0-10" }]),
        internal: "secret",
      }),
      request,
    );
    expect(options.body).toEqual({
      message: "invalid_field_options",
      data: { errors: [{ key: "options.decimals", message: "must be 0-10" }] },
    });
    const hidden = httpErrorOf(
      domainError(Code.NotFound, "table_not_found", { table_id: "7" }),
      request,
    );
    expect(hidden.body).toEqual({ message: "table_not_found", data: {} });
  });

  it("falls back on the gRPC code: Unavailable and DeadlineExceeded are 503", () => {
    for (const code of [Code.Unavailable, Code.DeadlineExceeded]) {
      const response = httpErrorOf(new ConnectError("connect ECONNREFUSED", code), request);
      expect(response.status).toBe(503);
      expect(response.body).toEqual({ message: "service_unavailable", data: {} });
      expect(response.log).toBe("warn");
    }
  });

  it("answers a dependency that cannot be reached (Redis away, a connection cut) with 503", () => {
    for (const error of [
      new Error("Redis unavailable (reconnecting)"),
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6379"), { code: "ECONNREFUSED" }),
    ]) {
      expect(httpErrorOf(error, request)).toMatchObject({
        status: 503,
        body: { message: "service_unavailable", data: {} },
      });
    }
  });

  it("answers anything unknown with 500 and the request id, never the message", () => {
    const unknown = [
      new Error("database password is hunter2"),
      new ConnectError("boom", Code.Internal),
      domainError(Code.InvalidArgument, "not_in_the_table"),
      domainError(Code.Internal, "internal_error"),
      "a thrown string",
    ];
    for (const error of unknown) {
      const response = httpErrorOf(error, request);
      expect(response.status).toBe(500);
      expect(response.body).toEqual({ message: "internal_error", data: { request_id: "req-1" } });
      expect(JSON.stringify(response.body)).not.toMatch(/hunter2|boom|not_in_the_table/);
      expect(response.log).toBe("error");
    }
  });

  it("writes the exact validation envelope for the gateway's and the services' refusals", () => {
    const own = httpErrorOf(
      ValidationFailed.of("body", "email", "must be a valid e-mail", "invalid_value"),
      request,
    );
    expect(own).toMatchObject({
      status: 400,
      body: {
        status_code: 400,
        detail: "Validation failed for POST /auth/login",
        extra: [
          {
            key: "email",
            message: "must be a valid e-mail",
            source: "body",
            code: "invalid_value",
          },
        ],
      },
    });
    const fromService = httpErrorOf(
      validationFailed([
        { key: "12", message: "must be a number", source: "body", code: "invalid_type" },
      ]),
      request,
    );
    expect(fromService.body).toEqual({
      status_code: 400,
      detail: "Validation failed for POST /auth/login",
      extra: [{ key: "12", message: "must be a number", source: "body", code: "invalid_type" }],
    });
  });

  it("maps HTTP errors thrown by Koa libraries by their status", () => {
    const httpError = (status: number) => Object.assign(new Error("x"), { status, expose: true });
    expect(httpErrorOf(httpError(404), request).body).toEqual({ message: "not_found", data: {} });
    expect(httpErrorOf(httpError(413), request).status).toBe(413);
    expect(httpErrorOf(httpError(400), request).status).toBe(400);
    expect(httpErrorOf(httpError(502), request).status).toBe(500);
  });
});
