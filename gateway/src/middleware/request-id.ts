import { randomUUID } from "node:crypto";
import { type Logger, REQUEST_ID_HEADER } from "@rowbase/kit";
import type { Middleware } from "koa";
import type { GatewayState } from "../gateway-context.js";

/**
 * A client's id is echoed only when it is short and plain, so it cannot inject into logs or
 * headers downstream; anything else gets a fresh UUID.
 */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestIdOf(header: string | undefined): string {
  return header !== undefined && SANE_REQUEST_ID.test(header) ? header : randomUUID();
}

/** Gives every request an id, a logger bound to it and the `X-Request-Id` response header. */
export function requestId(logger: Logger): Middleware<GatewayState> {
  return async (ctx, next) => {
    const id = requestIdOf(ctx.get(REQUEST_ID_HEADER) || undefined);
    ctx.state.requestId = id;
    ctx.state.log = logger.child({ request_id: id });
    ctx.set(REQUEST_ID_HEADER, id);
    await next();
  };
}
