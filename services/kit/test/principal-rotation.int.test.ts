import { Code, ConnectError } from "@connectrpc/connect";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  callAs,
  createServiceClient,
  type GrpcServer,
  type Principal,
  requireService,
} from "../src/index.js";
import { startTestGrpcServer } from "./test-grpc-server.js";

const CURRENT = "the-current-internal-secret-of-32-chars";
const PREVIOUS = "the-previous-internal-secret-of-32-char";
const UNRELATED = "an-unrelated-internal-secret-of-32-chars";
const CALLER: Principal = { kind: "service", service: "gateway" };

/** A server whose one RPC answers only a caller with a verified service principal. */
function startServer(previousInternalSecret?: string): Promise<GrpcServer> {
  return startTestGrpcServer({
    internalSecret: CURRENT,
    previousInternalSecret,
    routes: (router) =>
      router.service(OrganizationService, {
        getPlan(_req, ctx) {
          requireService(ctx);
          return {};
        },
      }),
  });
}

let rotating: GrpcServer;
let settled: GrpcServer;

beforeAll(async () => {
  rotating = await startServer(PREVIOUS);
  settled = await startServer();
});

afterAll(async () => {
  await rotating?.close();
  await settled?.close();
});

/** The gRPC code a GetPlan call signed with `secret` gets from `server` ("ok" when it passes). */
async function answer(server: GrpcServer, secret: string): Promise<string> {
  const client = createServiceClient(OrganizationService, `http://127.0.0.1:${server.port}`);
  try {
    await client.getPlan({ organizationId: 1n }, await callAs(secret, CALLER));
    return "ok";
  } catch (error) {
    return Code[ConnectError.from(error).code];
  }
}

describe("a principal signed with the previous internal secret", () => {
  it("is accepted by a service that has it as INTERNAL_JWT_SECRET_PREVIOUS", async () => {
    expect(await answer(rotating, PREVIOUS)).toBe("ok");
    expect(await answer(rotating, CURRENT)).toBe("ok");
  });

  it("is refused by a service that has no previous secret", async () => {
    expect(await answer(settled, PREVIOUS)).toBe("Unauthenticated");
    expect(await answer(settled, CURRENT)).toBe("ok");
  });

  it("does not open the door to any other secret", async () => {
    expect(await answer(rotating, UNRELATED)).toBe("Unauthenticated");
    expect(await answer(settled, UNRELATED)).toBe("Unauthenticated");
  });
});
