import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@rowbase/proto/grpc/health/v1/health_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, type GrpcServer, startGrpcServer } from "../src/index.js";

let server: GrpcServer;

beforeAll(async () => {
  server = await startGrpcServer({
    routes: () => {},
    services: [],
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("kit-test", "silent"),
    internalSecret: "a-shared-internal-secret-of-32-chars!",
  });
});

afterAll(async () => {
  await server?.close();
});

/** Calls grpc.health.v1.Health/Check with @grpc/grpc-js, as Kubernetes probes and grpc tools do. */
function check(service: string): Promise<{ status?: ServingStatus; code?: grpc.status }> {
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
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
