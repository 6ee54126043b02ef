import type { DescService } from "@bufbuild/protobuf";
import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
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

/** A client with a connection of its own, which `close()` tears down with every open stream. */
export interface DedicatedServiceClient<S extends DescService> {
  client: Client<S>;
  close(): void;
}

/**
 * A gRPC client of one service over its own HTTP/2 connection, for a client-streaming call that
 * the server may answer before its input ended (an upload refused mid-stream): connect-node then
 * neither ends nor resets the request side, and the half-open stream would hold its connection
 * (and the server's shutdown) until `close()` drops the connection.
 */
export function createDedicatedServiceClient<S extends DescService>(
  service: S,
  baseUrl: string,
): DedicatedServiceClient<S> {
  const sessionManager = new Http2SessionManager(baseUrl);
  return {
    client: createClient(
      service,
      createGrpcTransport({ baseUrl, sessionManager, interceptors: [traceContextInterceptor] }),
    ),
    close: () => sessionManager.abort(),
  };
}
