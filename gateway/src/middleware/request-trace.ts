import { ensureTracing, inServerSpan, SpanStatusCode } from "@rowbase/kit";
import type { Middleware } from "koa";
import type { GatewayState } from "../gateway-context.js";
import { routeTemplateOf } from "./http-metrics.js";
import { loggablePath } from "./loggable-path.js";

/**
 * One server span per request, continuing the client's W3C `traceparent` when it sends one.
 * Everything below runs inside it: log lines carry its `trace_id`, and every gRPC call passes
 * it on (downstream-call.ts), so the services' spans and logs join the same trace. First in
 * the stack but for the path's normalization (normalize-path.ts), which its `url.path` reads,
 * so that even the request id's and the error middleware's lines belong to it.
 */
export function requestTrace(): Middleware<GatewayState> {
  ensureTracing();
  return (ctx, next) =>
    inServerSpan(
      {
        name: ctx.method,
        header: (name) => ctx.get(name) || undefined,
        attributes: { "http.request.method": ctx.method, "url.path": loggablePath(ctx.path) },
      },
      async (span) => {
        try {
          await next();
        } finally {
          const route = routeTemplateOf(ctx);
          if (route) {
            span.updateName(`${ctx.method} ${route}`);
            span.setAttribute("http.route", route);
          }
          span.setAttribute("http.response.status_code", ctx.status);
          if (ctx.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        }
      },
    );
}
