import net from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, createOrm, type GrpcServer, type Orm } from "../src/index.js";
import { startTestGrpcServer } from "./test-grpc-server.js";

interface LogLine {
  msg: string;
  status?: string;
  err?: { message?: string };
}

// A "database" that accepts TCP connections and never says a word, as a hung server or a
// half-open load balancer does.
const sockets = new Set<net.Socket>();
const silent = net.createServer((socket) => {
  sockets.add(socket);
  socket.on("close", () => sockets.delete(socket));
});
const lines: LogLine[] = [];
let orm: Orm;
let server: GrpcServer;

beforeAll(async () => {
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const { port } = silent.address() as net.AddressInfo;
  orm = await createOrm({
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    schema: "kit_connect_timeout",
    entities: [],
    migrations: [],
    // One connection, so that the calls beyond the first wait for the pool rather than connect.
    poolSize: 1,
    connectTimeoutMs: 300,
  });
  server = await startTestGrpcServer({
    routes: (router) =>
      router.service(IdentityService, {
        async getJwks() {
          await orm.em.fork().execute("select 1");
          return { keys: [] };
        },
      }),
    services: [IdentityService],
    logger: createLogger("kit-test", "info", {
      write: (line: string) => void lines.push(JSON.parse(line) as LogLine),
    }),
  });
});

afterAll(async () => {
  await server?.close();
  for (const socket of sockets) socket.destroy();
  await orm?.close();
  await new Promise((resolve) => silent.close(resolve));
});

describe("a database that accepts connections and never answers", () => {
  it("fails each connection after the connect timeout, as Unavailable, also for the calls that waited for the pool", async () => {
    const identity = createClient(
      IdentityService,
      createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` }),
    );
    const outcomes = await Promise.all(
      [1, 2, 3].map(() => identity.getJwks({}).then(() => "answered", ConnectError.from)),
    );
    for (const outcome of outcomes) {
      expect(outcome).toBeInstanceOf(ConnectError);
      expect((outcome as ConnectError).code).toBe(Code.Unavailable);
    }
    // Each failed because opening its connection ran out of time; the calls that waited for
    // the one-connection pool were not cut short by that wait, they tried a connection of their own.
    const failures = lines.filter((line) => line.msg === "rpc failed: dependency unreachable");
    expect(failures).toHaveLength(3);
    for (const line of failures) expect(line.err?.message).toMatch(/timeout expired/);
  }, 20_000);
});
