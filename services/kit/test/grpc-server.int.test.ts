import { once } from "node:events";
import http2 from "node:http2";
import net from "node:net";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@rowbase/proto/grpc/health/v1/health_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { refusedStreamRetryInterceptor } from "../src/grpc-retry.js";
import { createServiceClient, type GrpcServer } from "../src/index.js";
import { startTestGrpcServer } from "./test-grpc-server.js";

let server: GrpcServer;

beforeAll(async () => {
  server = await startTestGrpcServer();
});

afterAll(async () => {
  await server?.close();
});

/** Calls grpc.health.v1.Health/Check with @grpc/grpc-js, as Kubernetes probes and grpc tools do. */
function check(
  service: string,
  target = `127.0.0.1:${server.port}`,
): Promise<{ status?: ServingStatus; code?: grpc.status }> {
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      `/${Health.typeName}/Check`,
      (req: Uint8Array) => Buffer.from(req),
      (res: Buffer) => fromBinary(HealthCheckResponseSchema, res),
      toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service })),
      (error, response) => {
        client.close();
        resolve(error ? { code: error.code } : { status: response?.status });
      },
    );
  });
}

describe("gRPC server", () => {
  it("answers grpc.health.v1 checks from a plain grpc-js client", async () => {
    expect(await check("")).toEqual({ status: ServingStatus.SERVING });
    expect(await check("rowbase.unknown.v1.NopeService")).toEqual({ code: grpc.status.NOT_FOUND });
  });
});

describe("gRPC server and a malformed :authority", () => {
  it("answers 400 and keeps serving, instead of ending the process", async () => {
    // An IPv6 address without brackets is no valid host: connect-node's URL of the request
    // threw outside any promise, and one such request from any pod ended the service.
    const session = http2.connect(`http://127.0.0.1:${server.port}`);
    try {
      const request = session.request({
        ":method": "POST",
        ":path": `/${Health.typeName}/Check`,
        ":authority": `::1:${server.port}`,
        "content-type": "application/grpc",
        te: "trailers",
      });
      request.end(Buffer.alloc(5));
      const [headers] = (await once(request, "response")) as [http2.IncomingHttpHeaders];
      expect(headers[":status"]).toBe(400);
      request.resume();
    } finally {
      session.close();
    }
    expect(await check("")).toEqual({ status: ServingStatus.SERVING });
  });
});

describe("gRPC server without a host", () => {
  it("answers on IPv4 and IPv6 alike, as a pod of either family needs", async (ctx) => {
    const ipv6 = await new Promise<boolean>((resolve) => {
      const probe = net.createServer().once("error", () => resolve(false));
      probe.listen(0, "::1", () => probe.close(() => resolve(true)));
    });
    if (!ipv6) ctx.skip("this machine has no IPv6 loopback");
    const anywhere = await startTestGrpcServer({ host: undefined });
    try {
      for (const address of ["127.0.0.1", "[::1]"]) {
        expect(await check("", `${address}:${anywhere.port}`), address).toEqual({
          status: ServingStatus.SERVING,
        });
      }
    } finally {
      await anywhere.close();
    }
  });
});

describe("gRPC server closing", () => {
  it("tells a Health.Watch stream NOT_SERVING and ends it, instead of waiting on it", async () => {
    const server = await startTestGrpcServer({ closeGraceMs: 60_000 });
    const client = createServiceClient(Health, `http://127.0.0.1:${server.port}`);
    const statuses: string[] = [];
    const watching = (async () => {
      try {
        for await (const r of client.watch({ service: "" })) statuses.push(ServingStatus[r.status]);
        statuses.push("ended");
      } catch (error) {
        statuses.push(`failed: ${ConnectError.from(error).code}`);
      }
    })();
    await expect.poll(() => statuses).toEqual(["SERVING"]);
    await server.close();
    await watching;
    expect(statuses).toEqual(["SERVING", "NOT_SERVING", "ended"]);
  });
});

describe("gRPC server connection age", () => {
  let aging: GrpcServer;

  beforeAll(async () => {
    aging = await startTestGrpcServer({
      maxConnectionAgeMs: 150,
    });
  });

  afterAll(async () => {
    await aging?.close();
  });

  it("sends GOAWAY to a connection past its age, then closes it", async () => {
    const session = http2.connect(`http://127.0.0.1:${aging.port}`);
    session.on("error", () => {});
    const [code, lastStreamId] = await once(session, "goaway");
    expect(code).toBe(http2.constants.NGHTTP2_NO_ERROR);
    // The first GOAWAY still accepts every stream the client may have in flight.
    expect(lastStreamId).toBe(2 ** 31 - 1);
    await once(session, "close");
  });

  it("loses no call while clients move from retired connections to new ones", async () => {
    const health = createClient(
      Health,
      createGrpcTransport({
        baseUrl: `http://127.0.0.1:${aging.port}`,
        interceptors: [refusedStreamRetryInterceptor],
      }),
    );
    const until = Date.now() + 1_500;
    const outcomes = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const seen = { ok: 0, failed: [] as string[] };
        while (Date.now() < until) {
          try {
            const { status } = await health.check({ service: "" });
            if (status === ServingStatus.SERVING) seen.ok++;
          } catch (error) {
            seen.failed.push(String(error));
          }
        }
        return seen;
      }),
    );
    expect(outcomes.flatMap((o) => o.failed)).toEqual([]);
    expect(outcomes.every((o) => o.ok > 0)).toBe(true);
  });
});

describe("gRPC server close", () => {
  it("cuts a connection whose peer never ends it once the close grace is over", async () => {
    const closing = await startTestGrpcServer({
      closeGraceMs: 200,
    });
    // A peer that keeps its side open after the server's FIN (half-open), as a stuck client does.
    const peer = net.connect({ port: closing.port, host: "127.0.0.1", allowHalfOpen: true });
    peer.on("error", () => {});
    peer.resume();
    await once(peer, "connect");
    const ended = once(peer, "end");
    await closing.close();
    // The server's side is gone; the peer still holds its own.
    await ended;
    expect(peer.destroyed).toBe(false);
    peer.destroy();
  });
});
