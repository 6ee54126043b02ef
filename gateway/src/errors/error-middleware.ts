import { Code, ConnectError, errorInfoOf } from "@rowbase/kit";
import type { Middleware } from "koa";
import type { GatewayState } from "../gateway-context.js";
import { hasBody } from "../http/request-body-timeouts.js";
import { loggablePath } from "../middleware/loggable-path.js";
import { httpErrorOf } from "./error-table.js";

/**
 * The only place errors become responses: everything below it throws (domain errors from the
 * services, the gateway's own ones, validation failures, bugs) and this applies the one table.
 * A 500 is logged with its cause and answers only the request id. A refusal answered while the
 * request's body is still arriving (an upload refused before or while it is read) closes the
 * connection: keeping it would mean reading the rest of the body, up to the largest upload, for
 * nothing.
 */
export function errorMiddleware(): Middleware<GatewayState> {
  return async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      // Once bytes went out, the status cannot change; let Koa end the socket and log it.
      if (ctx.headerSent) throw error;
      const response = httpErrorOf(error, {
        method: ctx.method,
        path: ctx.path,
        requestId: ctx.state.requestId,
      });
      if (response.log !== "none") {
        const line = { err: loggable(error), method: ctx.method, path: loggablePath(ctx.path) };
        if (response.log === "error") ctx.state.log.error(line, "request failed");
        else ctx.state.log.warn(line, "downstream unavailable");
      }
      ctx.status = response.status;
      ctx.set(response.headers);
      if (hasBody(ctx.req) && !ctx.req.complete) ctx.set("Connection", "close");
      ctx.body = response.body;
    }
  };
}

/**
 * A ConnectError's own fields would log its protobuf descriptors; this keeps what helps: the
 * gRPC code, the domain reason, the message and the cause with its stack.
 */
export function loggable(error: unknown): unknown {
  if (!(error instanceof ConnectError)) return error;
  return {
    type: "ConnectError",
    grpc_code: Code[error.code],
    reason: errorInfoOf(error)?.reason,
    message: error.rawMessage,
    cause:
      error.cause instanceof Error
        ? { type: error.cause.name, message: error.cause.message, stack: error.cause.stack }
        : error.cause,
  };
}
