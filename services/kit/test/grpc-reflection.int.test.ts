import { create, createFileRegistry, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import {
  type ServerReflectionRequest,
  ServerReflectionRequestSchema,
  type ServerReflectionResponse,
  ServerReflectionResponseSchema,
} from "@rowbase/proto/grpc/reflection/v1/reflection_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GrpcServer } from "../src/index.js";
import { startTestGrpcServer } from "./test-grpc-server.js";

let server: GrpcServer;

beforeAll(async () => {
  server = await startTestGrpcServer({
    services: [IdentityService],
  });
});

afterAll(async () => {
  await server?.close();
});

/**
 * Asks the server reflection service with @grpc/grpc-js, as grpcurl does: every request on one
 * bidirectional stream, one response each.
 */
function reflect(
  requests: ServerReflectionRequest["messageRequest"][],
): Promise<ServerReflectionResponse[]> {
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest(
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    (req: Uint8Array) => Buffer.from(req),
    (res: Buffer) => fromBinary(ServerReflectionResponseSchema, res),
  );
  const responses: ServerReflectionResponse[] = [];
  return new Promise((resolve, reject) => {
    call.on("data", (response: ServerReflectionResponse) => responses.push(response));
    call.on("error", reject);
    call.on("end", () => {
      client.close();
      resolve(responses);
    });
    for (const messageRequest of requests) {
      call.write(
        toBinary(
          ServerReflectionRequestSchema,
          create(ServerReflectionRequestSchema, { messageRequest }),
        ),
      );
    }
    call.end();
  });
}

/** The files of one answer as a registry, as a reflection client builds it. */
function registryOf(response: ServerReflectionResponse) {
  if (response.messageResponse.case !== "fileDescriptorResponse") {
    throw new Error(`expected files, got ${response.messageResponse.case}`);
  }
  const file = response.messageResponse.value.fileDescriptorProto.map((bytes) =>
    fromBinary(FileDescriptorProtoSchema, bytes),
  );
  return createFileRegistry(create(FileDescriptorSetSchema, { file }));
}

describe("gRPC server reflection", () => {
  it("lists the service, health and reflection", async () => {
    const [listed] = await reflect([{ case: "listServices", value: "" }]);
    expect(listed?.messageResponse.case).toBe("listServicesResponse");
    const names =
      listed?.messageResponse.case === "listServicesResponse"
        ? listed.messageResponse.value.service.map((s) => s.name)
        : [];
    expect(names.sort()).toEqual([
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "rowbase.identity.v1.IdentityService",
    ]);
  });

  it("answers the file of a service or a method with everything it imports", async () => {
    const [byService, byMethod, byMessage] = await reflect([
      { case: "fileContainingSymbol", value: "rowbase.identity.v1.IdentityService" },
      { case: "fileContainingSymbol", value: "rowbase.identity.v1.IdentityService.Register" },
      { case: "fileContainingSymbol", value: "rowbase.identity.v1.RegisterRequest" },
    ]);
    for (const response of [byService, byMethod, byMessage]) {
      const registry = registryOf(response as ServerReflectionResponse);
      const service = registry.getService("rowbase.identity.v1.IdentityService");
      const register = service?.methods.find((m) => m.name === "Register");
      expect(register?.input.typeName).toBe("rowbase.identity.v1.RegisterRequest");
      // Every message of every method resolves: the imports came with the file.
      for (const method of service?.methods ?? []) {
        expect(registry.getMessage(method.output.typeName)).toBeDefined();
      }
    }
  });

  it("answers a file by its name, and NOT_FOUND for unknown names and symbols", async () => {
    const [byName, unknownName, unknownSymbol, unknownMethod] = await reflect([
      { case: "fileByFilename", value: "grpc/health/v1/health.proto" },
      { case: "fileByFilename", value: "../etc/passwd" },
      { case: "fileContainingSymbol", value: "rowbase.nope.v1.Nope" },
      { case: "fileContainingSymbol", value: "rowbase.identity.v1.IdentityService.Nope" },
    ]);
    expect(
      registryOf(byName as ServerReflectionResponse).getService("grpc.health.v1.Health"),
    ).toBeDefined();
    for (const response of [unknownName, unknownSymbol, unknownMethod]) {
      expect(response?.messageResponse).toMatchObject({
        case: "errorResponse",
        value: { errorCode: grpc.status.NOT_FOUND },
      });
    }
  });
});
