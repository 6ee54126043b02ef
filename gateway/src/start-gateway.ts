import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { STREAMS } from "@rowbase/kit";
import { createGateway, type Gateway, type GatewayDeps } from "./app.js";
import { answerClientError, answerConnect } from "./http/client-error.js";
import { watchRequestBody } from "./http/request-body-timeouts.js";

export interface StartGatewayOptions {
  /** Defaults to `config.PORT`; 0 picks a free port. */
  port?: number;
  /** Defaults to every interface. */
  host?: string;
}

export interface RunningGateway {
  port: number;
  /**
   * Stops taking connections, waits for running requests (at most 10 s), then publishes the
   * usage counted since the last flush.
   */
  close(): Promise<void>;
}

const DRAIN_TIMEOUT_MS = 10_000;

const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * Listens with the gateway's Koa app; for `main.ts`, the one-process launcher and e2e tests.
 * The event streams are made sure of first, so usage events have their stream even when the
 * gateway starts before any service.
 */
export async function startGateway(
  deps: GatewayDeps,
  options: StartGatewayOptions = {},
): Promise<RunningGateway> {
  await deps.bus.ensureStreams(STREAMS);
  const { config } = deps;
  const server = createServer({
    // A request without Host is refused by the app (middleware/request-headers.ts), in the envelope.
    requireHostHeader: false,
    // Slow senders are bounded while they send (headers here, bodies by watchRequestBody),
    // not by Node's 300 s for a whole request, which cut any upload slower than 3.3 MB/s.
    headersTimeout: config.REQUEST_HEADERS_TIMEOUT_MS,
    requestTimeout: 0,
    // Node looks for headers past their time on this interval (30 s by default).
    connectionsCheckingInterval: Math.ceil(config.REQUEST_HEADERS_TIMEOUT_MS / 10),
  });
  // Idle keep-alive connections are closed by the client side first (load balancers and
  // ingress-nginx keep upstream connections 60 s): a gateway that closed them at Node's 5 s
  // could do so just as a proxy sends the next request on one, which the proxy answers 502.
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.on("clientError", answerClientError);
  server.on("connect", answerConnect);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? config.PORT, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  // The default base of the links handed out (signed file URLs, the OpenAPI servers) names the
  // port actually listened on, which PORT 0 or `options.port` only tell once it is bound. The
  // app answers from here on: requests are only read once this turn of the event loop ends.
  let gateway: Gateway;
  try {
    gateway = createGateway(deps, config.PUBLIC_BASE_URL ?? `http://localhost:${port}`);
  } catch (error) {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    throw error;
  }
  const answer = gateway.app.callback();
  const bodyTimeouts = {
    idleMs: config.REQUEST_BODY_IDLE_TIMEOUT_MS,
    minBytesPerSecond: config.REQUEST_BODY_MIN_BYTES_PER_SECOND,
  };
  server.on("request", (req, res) => {
    watchRequestBody(req, res, bodyTimeouts);
    void answer(req, res);
  });
  return {
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Open change streams end now, so that their clients reconnect to another replica.
      gateway.endStreams();
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), DRAIN_TIMEOUT_MS);
      await closed;
      clearTimeout(timer);
      await gateway.close();
    },
  };
}
