import { randomUUID } from "node:crypto";
import http2 from "node:http2";
import type { AddressInfo, Socket } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  createContextKey,
  type HandlerContext,
  type Interceptor,
} from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@rowbase/proto/grpc/health/v1/health_pb";
import { domainError, errorInfoOf, RETRY_AFTER_METADATA } from "./errors.js";
import { registerReflection } from "./grpc-reflection.js";
import { isRefusedStream } from "./grpc-retry.js";
import type { Logger } from "./logger.js";
import { type MetricsRegistry, processMetricsRegistry } from "./metrics.js";
import {
  cachedPrincipalVerifier,
  POLL_HEADER,
  PRINCIPAL_HEADER,
  type PrincipalSecrets,
  principalKey,
  REQUEST_ID_HEADER,
} from "./principal.js";
import { rpcObservabilityInterceptor } from "./rpc-observability.js";
import {
  isCancelledStatement,
  isLockNotAvailable,
  isTransientConflict,
  isUnreachableDependency,
} from "./unreachable.js";

export const requestIdKey = createContextKey<string>("", { description: "request id" });

/** The request id of the current call, for logs and events. */
export function requestIdOf(ctx: HandlerContext): string {
  return ctx.values.get(requestIdKey);
}

export interface GrpcServerOptions {
  /** Registers the service's handlers. */
  routes: (router: ConnectRouter) => void;
  /** Service descriptors reported SERVING by the health service. */
  services: DescService[];
  /** Every interface when absent (IPv6 included where the host has it). */
  host?: string | undefined;
  port: number;
  logger: Logger;
  internalSecret: string;
  /**
   * INTERNAL_JWT_SECRET_PREVIOUS: principals signed with it are accepted too (never signed),
   * so that the shared secret can be rotated without refusing calls.
   */
  previousInternalSecret?: string | undefined;
  /** Extra interceptors, innermost last (e.g. the EntityManager fork). */
  interceptors?: Interceptor[];
  /** Where the RPC counts and latencies go; the process's registry when absent. */
  metrics?: MetricsRegistry;
  /**
   * How long a client connection may live before the server asks the client to move to a new
   * one (default 5 minutes, ±10 % jitter). gRPC clients keep one HTTP/2 connection per target,
   * so without an age a replica added by a scale-up would get no calls from clients that were
   * already connected.
   */
  maxConnectionAgeMs?: number;
  /** How long `close` waits for running calls before it cuts their connections (10 s). */
  closeGraceMs?: number;
  /**
   * The longest deadline a call of this server may have (a schema change's conversion,
   * `SCHEMA_CHANGE_TIMEOUT_SECONDS`): a retired connection's calls may run that long before the
   * connection is cut (at least `CONNECTION_AGE_GRACE_MS`).
   */
  longestCallMs?: number;
}

const DEFAULT_MAX_CONNECTION_AGE_MS = 5 * 60_000;
/** How long a retired connection's calls may still run before it is cut. */
const CONNECTION_AGE_GRACE_MS = 30_000;
const LAST_STREAM_ID = 2 ** 31 - 1;
const DEFAULT_CLOSE_GRACE_MS = 10_000;

/**
 * Retires a client connection the way gRPC servers do (MAX_CONNECTION_AGE): a first GOAWAY
 * naming the highest stream id tells the client to open a new connection for new calls while
 * every call already on the wire is still accepted; a second later the session closes (the
 * real GOAWAY), and calls still running after the grace are cut.
 */
function retire(session: http2.ServerHttp2Session, graceMs: number): void {
  if (session.closed || session.destroyed) return;
  session.goaway(http2.constants.NGHTTP2_NO_ERROR, LAST_STREAM_ID);
  setTimeout(() => {
    if (session.closed || session.destroyed) return;
    session.close();
    setTimeout(() => session.destroy(), graceMs).unref();
  }, 1_000).unref();
}

export interface GrpcServer {
  port: number;
  /**
   * Marks the server NOT_SERVING, stops taking calls and waits for running ones, at most the
   * close grace: then it cuts whatever connection is still open.
   */
  close(): Promise<void>;
}

/**
 * Verifies the signed principal, carries the request id, and writes one log line per call.
 * Unexpected errors are logged with their cause and reach the client as a masked Internal.
 */
export function callContextInterceptor(
  logger: Logger,
  internalSecrets: PrincipalSecrets,
): Interceptor {
  const verifyPrincipal = cachedPrincipalVerifier(internalSecrets);
  return (next) => async (req) => {
    const started = performance.now();
    const requestId = req.header.get(REQUEST_ID_HEADER) || randomUUID();
    req.contextValues.set(requestIdKey, requestId);
    const signed = req.header.get(PRINCIPAL_HEADER);
    if (signed) req.contextValues.set(principalKey, await verifyPrincipal(signed));
    const procedure = `${req.service.typeName}/${req.method.name}`;
    try {
      const res = await next(req);
      const ok = { procedure, status: "ok", ms: elapsed(started), request_id: requestId };
      if (req.header.get(POLL_HEADER)) logger.debug(ok, "rpc");
      else logger.info(ok, "rpc");
      return res;
    } catch (error) {
      const line = { procedure, ms: elapsed(started), request_id: requestId };
      if (error instanceof ConnectError && isRefusedStream(error)) {
        // A call of this handler's was refused: passed on as it is, it would make this
        // handler's own caller retry it (refusedStreamRetryInterceptor), running it again.
        logger.warn({ ...line, status: "Unavailable", err: error }, "rpc failed: a call refused");
        throw new ConnectError("a service this call needs is unavailable", Code.Unavailable);
      }
      if (error instanceof ConnectError) {
        const reason = errorInfoOf(error)?.reason;
        const status = Code[error.code];
        if (reason || error.code !== Code.Internal) logger.info({ ...line, status, reason }, "rpc");
        else logger.error({ ...line, status, err: error }, "rpc failed");
        throw error;
      }
      if (isUnreachableDependency(error)) {
        // PostgreSQL or Redis away (a restart, a failover): 503 for the caller, not a 500.
        logger.warn(
          { ...line, status: "Unavailable", err: error },
          "rpc failed: dependency unreachable",
        );
        throw new ConnectError(
          "dependency unreachable",
          Code.Unavailable,
          undefined,
          undefined,
          error,
        );
      }
      if (isCancelledStatement(error)) {
        // Past its statement timeout: the caller has given up too (the gateway's 503).
        logger.warn({ ...line, status: "DeadlineExceeded", err: error }, "rpc failed: too slow");
        throw new ConnectError("the query took too long", Code.DeadlineExceeded);
      }
      if (isTransientConflict(error)) {
        // A deadlock or serialization failure: the same call again normally goes through.
        logger.warn({ ...line, status: "Unavailable", err: error }, "rpc failed: try again");
        throw new ConnectError("a conflicting change: try again", Code.Unavailable);
      }
      if (isLockNotAvailable(error)) {
        // A lock not had within its `lock_timeout` (a write of a table being converted):
        // nothing was written, and the client is told when to try again.
        logger.warn({ ...line, status: "Unavailable", err: error }, "rpc failed: a lock is held");
        throw lockHeld();
      }
      logger.error({ ...line, status: "Internal", err: error }, "rpc failed");
      throw new ConnectError("internal error", Code.Internal, undefined, undefined, error);
    }
  };
}

/**
 * The `Retry-After` of a call refused because a lock was held past its wait: a table's values
 * being converted hold its writes for seconds to minutes.
 */
const LOCK_RETRY_AFTER_SECONDS = 5;

/**
 * A call refused because what it must lock is held (a write of a table whose values are being
 * converted, records' `write_gate`): 503 `service_unavailable` with `Retry-After`, nothing
 * written. PostgreSQL's lock_not_available becomes this (`callContextInterceptor`).
 */
export function lockHeld(): ConnectError {
  return domainError(Code.Unavailable, "service_unavailable", {
    [RETRY_AFTER_METADATA]: String(LOCK_RETRY_AFTER_SECONDS),
  });
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

/**
 * Serves Connect/gRPC handlers over HTTP/2 cleartext, with grpc.health.v1 and server reflection
 * (grpc.reflection.v1) beside them.
 */
export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServer> {
  let serving = true;
  /** Resolved by `close`: open Health.Watch streams then say NOT_SERVING and end. */
  const stopping = Promise.withResolvers<void>();
  const names = new Set(["", ...options.services.map((s) => s.typeName)]);
  const status = (service: string) =>
    !names.has(service)
      ? ServingStatus.SERVICE_UNKNOWN
      : serving
        ? ServingStatus.SERVING
        : ServingStatus.NOT_SERVING;

  const handler = connectNodeAdapter({
    interceptors: [
      rpcObservabilityInterceptor(options.metrics ?? processMetricsRegistry()),
      callContextInterceptor(options.logger, [
        options.internalSecret,
        options.previousInternalSecret,
      ]),
      ...(options.interceptors ?? []),
    ],
    routes(router) {
      options.routes(router);
      router.service(Health, {
        check(req) {
          const s = status(req.service);
          if (s === ServingStatus.SERVICE_UNKNOWN) {
            throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
          }
          return { status: s };
        },
        async *watch(req, ctx) {
          yield { status: status(req.service) };
          const gone = new Promise<void>((resolve) =>
            ctx.signal.addEventListener("abort", () => resolve(), { once: true }),
          );
          await Promise.race([gone, stopping.promise]);
          // Closing: the watcher learns it, and the stream no longer holds the close back.
          if (!ctx.signal.aborted) yield { status: status(req.service) };
        },
      });
      registerReflection(router, [...options.services, Health]);
    },
  });

  const server = http2.createServer((req, res) => {
    // connect-node makes each request's URL from its :authority and throws, outside any
    // promise, when there is none or it is no valid host (an IPv6 address without brackets,
    // `::1:50051`): thrown from a request listener, one such request from any peer would end
    // the process.
    try {
      handler(req, res);
    } catch (error) {
      options.logger.warn({ err: error, authority: req.authority }, "unusable gRPC request");
      if (!res.headersSent) res.writeHead(400);
      res.end();
    }
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  const maxAge = options.maxConnectionAgeMs ?? DEFAULT_MAX_CONNECTION_AGE_MS;
  // A call that started just before its connection was retired still gets its whole deadline.
  const graceMs = Math.max(CONNECTION_AGE_GRACE_MS, options.longestCallMs ?? 0);
  server.on("session", (session) => {
    sessions.add(session);
    const aged = setTimeout(() => retire(session, graceMs), maxAge * (0.9 + Math.random() * 0.2));
    aged.unref();
    session.on("close", () => {
      clearTimeout(aged);
      sessions.delete(session);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    port,
    async close() {
      serving = false;
      stopping.resolve();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const session of sessions) session.close();
      // A graceful close waits for every connection to end, and a peer may never end its side
      // (seen: a session destroyed while its socket stayed open), so the wait is bounded.
      const cut = setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, options.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS);
      await closed;
      clearTimeout(cut);
    },
  };
}
