import {
  createLogger,
  type GrpcServer,
  type GrpcServerOptions,
  startGrpcServer,
} from "../src/index.js";

/** The internal secret of the kit tests' servers (and of the principals they sign). */
export const TEST_INTERNAL_SECRET = "a-shared-internal-secret-of-32-chars!";

/**
 * A gRPC server on a free loopback port with no routes or services of its own (health and
 * reflection only) and silent logs; `options` override any of that.
 */
export function startTestGrpcServer(options: Partial<GrpcServerOptions> = {}): Promise<GrpcServer> {
  return startGrpcServer({
    routes: () => {},
    services: [],
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("kit-test", "silent"),
    internalSecret: TEST_INTERNAL_SECRET,
    ...options,
  });
}
