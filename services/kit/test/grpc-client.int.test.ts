import http2 from "node:http2";
import net from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@rowbase/proto/grpc/health/v1/health_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createDedicatedServiceClient,
  createServiceClient,
  DEFAULT_RPC_TIMEOUT_MS,
  type GrpcServer,
} from "../src/index.js";
import { startTestGrpcServer } from "./test-grpc-server.js";

let server: GrpcServer;
/** A "service" that accepts every call and never answers it, as a hung process does. */
let hung: http2.Http2Server;
let hungUrl: string;

beforeAll(async () => {
  server = await startTestGrpcServer();
  hung = http2.createServer(() => {});
  await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", resolve));
  hungUrl = `http://127.0.0.1:${(hung.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  await server?.close();
  await new Promise<void>((resolve) => {
    hung?.close(() => resolve());
    for (const session of sessions) session.destroy();
  });
});

const sessions = new Set<http2.ServerHttp2Session>();
beforeAll(() => {
  hung.on("session", (session) => sessions.add(session));
});

async function codeOf(call: Promise<unknown>): Promise<Code | "ok"> {
  try {
    await call;
    return "ok";
  } catch (error) {
    return ConnectError.from(error).code;
  }
}

describe("service clients' deadlines", () => {
  it("give every unary call a default deadline below the gateway's 10 s", () => {
    expect(DEFAULT_RPC_TIMEOUT_MS).toBeGreaterThan(0);
    expect(DEFAULT_RPC_TIMEOUT_MS).toBeLessThan(10_000);
  });

  it("end a unary call to a service that hangs with DeadlineExceeded", async () => {
    const client = createServiceClient(Health, hungUrl, { defaultTimeoutMs: 300 });
    expect(await codeOf(client.check({ service: "" }))).toBe(Code.DeadlineExceeded);
  });

  it("let a call's own timeoutMs win over the default", async () => {
    const client = createServiceClient(Health, hungUrl, { defaultTimeoutMs: 60_000 });
    expect(await codeOf(client.check({ service: "" }, { timeoutMs: 200 }))).toBe(
      Code.DeadlineExceeded,
    );
  });

  it("answer a unary call of a live service within the default", async () => {
    const client = createServiceClient(Health, `http://127.0.0.1:${server.port}`, {
      defaultTimeoutMs: 2_000,
    });
    expect((await client.check({ service: "" })).status).toBe(ServingStatus.SERVING);
  });

  it("turn a connection that breaks mid-call (a service killed) into Unavailable", async () => {
    const dying = http2.createServer();
    dying.on("stream", (stream) => stream.session?.socket.destroy());
    await new Promise<void>((resolve) => dying.listen(0, "127.0.0.1", resolve));
    try {
      const port = (dying.address() as net.AddressInfo).port;
      const client = createServiceClient(Health, `http://127.0.0.1:${port}`);
      expect(await codeOf(client.check({ service: "" }))).toBe(Code.Unavailable);
    } finally {
      dying.close();
    }
  });

  it("leave an error the service sent as it is", async () => {
    const client = createServiceClient(Health, `http://127.0.0.1:${server.port}`);
    expect(await codeOf(client.check({ service: "rowbase.unknown.v1.Nope" }))).toBe(Code.NotFound);
  });

  it("leave streaming calls (file transfers) without the default deadline", async () => {
    const client = createServiceClient(Health, `http://127.0.0.1:${server.port}`, {
      defaultTimeoutMs: 200,
    });
    const abort = new AbortController();
    const stream = client.watch({ service: "" }, { signal: abort.signal });
    const iterator = stream[Symbol.asyncIterator]();
    expect((await iterator.next()).value?.status).toBe(ServingStatus.SERVING);
    // Well past the unary default: the stream is still open, only our abort ends it.
    const next = iterator.next();
    const outcome = await Promise.race([
      next.then(
        () => "message",
        (error: unknown) => `ended: ${ConnectError.from(error).code}`,
      ),
      new Promise((resolve) => setTimeout(() => resolve("still open"), 800)),
    ]);
    expect(outcome).toBe("still open");
    abort.abort();
    expect(await codeOf(next)).toBe(Code.Canceled);
  });
});

describe("service clients' compression", () => {
  it("ask for no compressed answers, unary or streaming", async () => {
    const seen: http2.IncomingHttpHeaders[] = [];
    const recording = http2.createServer();
    recording.on("stream", (stream, headers) => {
      seen.push(headers);
      stream.respond({ ":status": 404 });
      stream.end();
    });
    await new Promise<void>((resolve) => recording.listen(0, "127.0.0.1", resolve));
    try {
      const port = (recording.address() as net.AddressInfo).port;
      const client = createServiceClient(Health, `http://127.0.0.1:${port}`);
      await codeOf(client.check({ service: "" }));
      await codeOf(
        (async () => {
          for await (const _ of client.watch({ service: "" })) break;
        })(),
      );
      expect(seen.map((headers) => headers[":path"])).toEqual([
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
      ]);
      for (const headers of seen) {
        for (const name of ["accept-encoding", "connect-accept-encoding", "grpc-accept-encoding"]) {
          expect(String(headers[name] ?? "")).not.toMatch(/gzip|br/);
        }
      }
    } finally {
      recording.close();
    }
  });
});

describe("service clients' cancelled streams", () => {
  it("release a stream the server had already ended, so that its connection can close", {
    timeout: 15_000,
  }, async () => {
    let ended!: () => void;
    const served = new Promise<void>((resolve) => {
      ended = resolve;
    });
    const files = await startTestGrpcServer({
      routes: (router) =>
        router.service(FilesService, {
          async *serveFile() {
            try {
              yield { payload: { case: "header" as const, value: { organizationId: 1n } } };
              yield { payload: { case: "chunk" as const, value: new Uint8Array(60_000) } };
            } finally {
              ended();
            }
          },
        }),
      // Far past the test's timeout: only a connection that really closes lets close() end.
      closeGraceMs: 60_000,
    });
    const client = createServiceClient(FilesService, `http://127.0.0.1:${files.port}`);
    const abort = new AbortController();
    const messages = client.serveFile({}, { signal: abort.signal })[Symbol.asyncIterator]();
    expect((await messages.next()).value?.payload.case).toBe("header");
    // The service sends the rest and ends the stream; the caller reads no further (a transfer
    // refused after the header, say) and cancels.
    await served;
    await new Promise((resolve) => setTimeout(resolve, 100));
    abort.abort();
    await files.close();
  });
});

describe("a refused stream", () => {
  it("is retried by the caller whose call it was, never by the caller's own caller", async () => {
    // B refuses every stream, as a server past its GOAWAY does.
    const b = http2.createServer();
    let bStreams = 0;
    b.on("stream", (stream) => {
      bStreams += 1;
      stream.on("error", () => {});
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    });
    await new Promise<void>((resolve) => b.listen(0, "127.0.0.1", resolve));
    const bClient = createServiceClient(
      Health,
      `http://127.0.0.1:${(b.address() as net.AddressInfo).port}`,
    );
    // A's handler has done its work (a write, say) before its call to B is refused.
    let handlerRuns = 0;
    const a = await startTestGrpcServer({
      services: [OrganizationService],
      routes: (router) => {
        router.rpc(OrganizationService.method.getMembership, async () => {
          handlerRuns += 1;
          await bClient.check({ service: "" });
          return {};
        });
      },
    });
    try {
      const aClient = createServiceClient(OrganizationService, `http://127.0.0.1:${a.port}`);
      const error = await aClient
        .getMembership({ organizationId: 1n, userId: 1n })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.Unavailable);
      expect((error as ConnectError).rawMessage).not.toContain("REFUSED_STREAM");
      // A retried its own call to B (three tries); nobody ran A's handler again.
      expect(handlerRuns).toBe(1);
      expect(bStreams).toBe(3);
    } finally {
      await a.close();
      b.close();
    }
  });
});

describe("a handler's failure", () => {
  it("is Unavailable for a deadlock (try again), Internal for a fault", async () => {
    const deadlock = Object.assign(new Error("deadlock detected"), { code: "40P01" });
    let thrown: unknown = deadlock;
    const a = await startTestGrpcServer({
      services: [OrganizationService],
      routes: (router) => {
        router.rpc(OrganizationService.method.getMembership, async () => {
          throw thrown;
        });
      },
    });
    try {
      const client = createServiceClient(OrganizationService, `http://127.0.0.1:${a.port}`);
      const failure = async () =>
        ConnectError.from(
          await client.getMembership({ organizationId: 1n, userId: 1n }).catch((e: unknown) => e),
        );
      expect((await failure()).code).toBe(Code.Unavailable);
      thrown = new Error("a wrapped one", { cause: deadlock });
      expect((await failure()).code).toBe(Code.Unavailable);
      thrown = new TypeError("a bug");
      expect((await failure()).code).toBe(Code.Internal);
    } finally {
      await a.close();
    }
  });
});

/** Whether this machine can listen on the IPv6 loopback (a host or container without IPv6 cannot). */
async function canBindIpv6Loopback(): Promise<boolean> {
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once("error", reject);
      probe.listen(0, "::1", resolve);
    });
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    return true;
  } catch {
    return false;
  }
}

const noIpv6Loopback = !(await canBindIpv6Loopback());

describe("a service at an IPv6 literal", () => {
  it.skipIf(noIpv6Loopback)(
    "is called through http://[::1]:port, unary and streaming",
    async () => {
      const ipv6 = await startTestGrpcServer({ host: "::1" });
      try {
        const url = `http://[::1]:${ipv6.port}`;
        const client = createServiceClient(Health, url, { defaultTimeoutMs: 5_000 });
        expect((await client.check({ service: "" })).status).toBe(ServingStatus.SERVING);
        // Health.Watch is a server stream: it goes over gRPC, not Connect.
        const watch = new AbortController();
        for await (const update of client.watch({ service: "" }, { signal: watch.signal })) {
          expect(update.status).toBe(ServingStatus.SERVING);
          watch.abort();
          break;
        }
        const dedicated = createDedicatedServiceClient(Health, url);
        try {
          expect((await dedicated.client.check({ service: "" })).status).toBe(
            ServingStatus.SERVING,
          );
        } finally {
          dedicated.close();
        }
      } finally {
        await ipv6.close();
      }
    },
  );
});
