import { AsyncLocalStorage } from "node:async_hooks";
import type http2 from "node:http2";
import type { DescService } from "@bufbuild/protobuf";
import {
  type Client,
  Code,
  ConnectError,
  createClient,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import { refusedStreamRetryInterceptor } from "./grpc-retry.js";
import { injectTraceContext, TRACEPARENT_HEADER } from "./tracing.js";

/**
 * Carries the caller's trace to the service called (W3C `traceparent`), unless the call's own
 * headers already name one, so service-to-service calls join the trace of the request.
 */
export const traceContextInterceptor: Interceptor = (next) => (req) => {
  if (!req.header.has(TRACEPARENT_HEADER)) injectTraceContext(req.header);
  return next(req);
};

const TRANSPORT_FAILURE_CODES = new Set([Code.Canceled, Code.Aborted, Code.Internal, Code.Unknown]);

/**
 * A call whose connection broke before the service answered (the service's process died, the
 * connection was reset or closed mid-call) is Unavailable: the service cannot be reached, as
 * when the connection is refused (503 at the gateway). connect-node reports these as Canceled
 * (the session went away: its streams are cancelled), Aborted (ECONNRESET) or Internal (a
 * stream closed with an error, or ended without its status). A streaming call can break after
 * its answer's headers, as it reads the answer's messages, so those are classified too. An
 * error the service itself sent is left as it is: a unary one (Connect protocol) comes with the
 * headers of the service's answer, a content-type at least; a streaming one (gRPC) with its
 * `grpc-status` trailer. So is a call this process cancelled (its signal is aborted).
 */
export const transportFailureInterceptor: Interceptor = (next) => async (req) => {
  const classify = (error: unknown): unknown => {
    if (
      error instanceof ConnectError &&
      TRANSPORT_FAILURE_CODES.has(error.code) &&
      !error.metadata.has(req.stream ? "grpc-status" : "content-type") &&
      !req.signal.aborted
    ) {
      return new ConnectError(
        `connection to the service failed: ${error.rawMessage}`,
        Code.Unavailable,
        undefined,
        undefined,
        error,
      );
    }
    return error;
  };
  try {
    const res = await next(req);
    return res.stream ? { ...res, message: classified(res.message, classify) } : res;
  } catch (error) {
    throw classify(error);
  }
};

/** The messages of a streaming answer, an error reading them classified by `classify`. */
async function* classified<T>(
  messages: AsyncIterable<T>,
  classify: (error: unknown) => unknown,
): AsyncGenerator<T> {
  try {
    yield* messages;
  } catch (error) {
    throw classify(error);
  }
}

/** The signal of the streaming call that is opening its HTTP/2 stream. */
const streamCallSignal = new AsyncLocalStorage<AbortSignal>();

/** Lets `ReleasingSessionManager` know the signal of the streaming call it opens a stream for. */
const streamSignalInterceptor: Interceptor = (next) => (req) =>
  req.stream ? streamCallSignal.run(req.signal, () => next(req)) : next(req);

/**
 * connect-node ends a streaming call its caller cancels with RST_STREAM, except when the server
 * had already ended the stream: then it leaves the HTTP/2 stream as it is, holding messages
 * nobody will read, open for good, and with it the connection (seen: a served file refused
 * after its header arrived, which left the files service's shutdown waiting on the connection).
 * This session manager destroys a stream once its call is cancelled, after connect-node had its
 * turn (which sends the RST_STREAM when the stream was still open).
 *
 * It also names the service in each request's `:authority` as the URL does. Node's HTTP/2
 * client would send the host without its brackets, so an IPv6 literal (`http://[::1]:50051`)
 * became `::1:50051`, which is no valid authority: the server cannot tell the host from the
 * port and refuses every call.
 */
class ReleasingSessionManager extends Http2SessionManager {
  /** `host:port` of the service's URL, an IPv6 address in brackets (`[::1]:50051`). */
  private readonly authorityHeader: string;

  constructor(baseUrl: string) {
    super(baseUrl);
    this.authorityHeader = new URL(baseUrl).host;
  }

  override async request(
    method: string,
    path: string,
    headers: http2.OutgoingHttpHeaders,
    options: Omit<http2.ClientSessionRequestOptions, "signal">,
  ): Promise<http2.ClientHttp2Stream> {
    const signal = streamCallSignal.getStore();
    const stream = await super.request(
      method,
      path,
      { ":authority": this.authorityHeader, ...headers },
      options,
    );
    if (signal) {
      const release = () =>
        setImmediate(() => {
          if (!stream.destroyed) stream.destroy();
        });
      if (signal.aborted) release();
      else {
        signal.addEventListener("abort", release, { once: true });
        stream.once("close", () => signal.removeEventListener("abort", release));
      }
    }
    return stream;
  }
}

/**
 * How services call each other, over one HTTP/2 session per client (calls multiplexed; the
 * servers speak gRPC, gRPC-Web and Connect). Unary calls use the Connect protocol with binary
 * protobuf: a plain request and answer, without gRPC's message envelope and trailers, and
 * cheaper for both ends. Streaming calls (file uploads and downloads)
 * stay on gRPC, whose trailers say whether the service or the connection ended a stream.
 * Neither asks for compressed answers.
 */
function serviceTransport(
  baseUrl: string,
  sessionManager: Http2SessionManager,
  interceptors: Interceptor[],
): Transport {
  // No compression: Connect's default asks servers to gzip every answer over 1 KiB, which costs
  // both ends more CPU than sending the bytes inside a cluster (or over loopback) does, and
  // files are mostly compressed already.
  const common = {
    baseUrl,
    httpVersion: "2" as const,
    sessionManager,
    interceptors,
    acceptCompression: [],
  };
  const unary = createConnectTransport({ ...common, useBinaryFormat: true });
  const streams = createGrpcTransport({
    ...common,
    interceptors: [...interceptors, streamSignalInterceptor],
  });
  return { unary: unary.unary.bind(unary), stream: streams.stream.bind(streams) };
}

/**
 * The deadline of a unary call that names none: below the gateway's own (10 s), so that a
 * service waiting on another that hangs answers 503 itself, in bounded time, before the gateway
 * gives up on it.
 */
export const DEFAULT_RPC_TIMEOUT_MS = 8_000;

export interface ServiceClientOptions {
  /** The deadline of unary calls that pass no `timeoutMs` (a call's `timeoutMs: 0` has none). */
  defaultTimeoutMs?: number;
}

/**
 * Gives every unary call without a `timeoutMs` of its own the default deadline. Streaming calls
 * (file uploads and downloads) keep theirs, none unless the caller sets one: a large transfer
 * must not be cut at a deadline sized for a lookup. connect-node's own `defaultTimeoutMs` would
 * apply to both.
 */
export function withUnaryDeadline(transport: Transport, defaultTimeoutMs: number): Transport {
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) =>
      transport.unary(method, signal, timeoutMs ?? defaultTimeoutMs, header, input, contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      transport.stream(method, signal, timeoutMs, header, input, contextValues),
  };
}

/**
 * A client of one service at `baseUrl` (`http://host:port`), over one HTTP/2 session; its
 * unary calls have a deadline (DEFAULT_RPC_TIMEOUT_MS unless told), streaming calls none.
 */
export function createServiceClient<S extends DescService>(
  service: S,
  baseUrl: string,
  options: ServiceClientOptions = {},
): Client<S> {
  return createClient(
    service,
    withUnaryDeadline(
      serviceTransport(baseUrl, new ReleasingSessionManager(baseUrl), [
        transportFailureInterceptor,
        traceContextInterceptor,
        refusedStreamRetryInterceptor,
      ]),
      options.defaultTimeoutMs ?? DEFAULT_RPC_TIMEOUT_MS,
    ),
  );
}

/** A client with a connection of its own, which `close()` tears down with every open stream. */
export interface DedicatedServiceClient<S extends DescService> {
  client: Client<S>;
  close(): void;
}

/**
 * A client of one service over its own HTTP/2 connection, for a client-streaming call that
 * the server may answer before its input ended (an upload refused mid-stream): connect-node then
 * neither ends nor resets the request side, and the half-open stream would hold its connection
 * (and the server's shutdown) until `close()` drops the connection.
 */
export function createDedicatedServiceClient<S extends DescService>(
  service: S,
  baseUrl: string,
): DedicatedServiceClient<S> {
  const sessionManager = new ReleasingSessionManager(baseUrl);
  return {
    client: createClient(
      service,
      withUnaryDeadline(
        serviceTransport(baseUrl, sessionManager, [
          transportFailureInterceptor,
          traceContextInterceptor,
        ]),
        DEFAULT_RPC_TIMEOUT_MS,
      ),
    ),
    close: () => sessionManager.abort(),
  };
}
