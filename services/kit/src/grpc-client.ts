import type { DescService } from "@bufbuild/protobuf";
import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { injectTraceContext, TRACEPARENT_HEADER } from "./tracing.js";

/**
 * Carries the caller's trace to the service called (W3C `traceparent`), unless the call's own
 * headers already name one, so service-to-service calls join the trace of the request.
 */
export const traceContextInterceptor: Interceptor = (next) => (req) => {
  if (!req.header.has(TRACEPARENT_HEADER)) injectTraceContext(req.header);
  return next(req);
};

/** A gRPC client of one service at `baseUrl` (`http://host:port`), over one HTTP/2 session. */
export function createServiceClient<S extends DescService>(service: S, baseUrl: string): Client<S> {
  return createClient(
    service,
    createGrpcTransport({ baseUrl, interceptors: [traceContextInterceptor] }),
  );
}
