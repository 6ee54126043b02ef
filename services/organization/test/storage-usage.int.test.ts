import net from "node:net";
import { ConnectError } from "@connectrpc/connect";
import { Code, createLogger, type GrpcServer, requireService, startGrpcServer } from "@rowbase/kit";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { as, type Harness, newOrganization, SECRET, startHarness } from "./harness.js";

// GetLimits asks FilesService.GetStorageUsage for usage.file_storage_bytes (SPEC section 10)
// when FILES_GRPC_URL is set; here a stand-in files service answers on that address.

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const STORED = 123_456_789n;

let h: Harness;
let files: GrpcServer | undefined;
let filesPort: number;
const asked: { organizationId: bigint; caller: string }[] = [];

function startFiles(): Promise<GrpcServer> {
  return startGrpcServer({
    routes: (router) =>
      router.service(FilesService, {
        getStorageUsage(req, ctx) {
          const caller = requireService(ctx);
          asked.push({
            organizationId: req.organizationId,
            caller: caller.kind === "service" ? caller.service : caller.name,
          });
          return { fileStorageBytes: STORED };
        },
      }),
    services: [FilesService],
    host: "127.0.0.1",
    port: filesPort,
    logger: createLogger("files-stand-in", "silent"),
    internalSecret: SECRET,
  });
}

beforeAll(async () => {
  filesPort = await freePort();
  files = await startFiles();
  h = await startHarness({ FILES_GRPC_URL: `http://127.0.0.1:${filesPort}` });
});

afterAll(async () => {
  await files?.close();
  await h?.stop();
});

describe("file storage in GetLimits", () => {
  it("is what the files service counts, asked as the organization service", async () => {
    const owner = await h.user("Owner");
    const { organizationId } = await newOrganization(h, owner, "Stored");
    // The local counter says otherwise: the files service's figure wins.
    await h.db.query(
      "update organization.organization_usage set file_storage_bytes = 7 where organization_id = $1",
      [organizationId.toString()],
    );
    asked.length = 0;
    const limits = await h.org.getLimits({ organizationId }, await as(owner));
    expect(limits.usage?.fileStorageBytes).toBe(STORED);
    expect(asked).toEqual([{ organizationId, caller: "organization" }]);
  });

  it("fails with Unavailable when the files service cannot be reached", async () => {
    const owner = await h.user("Owner");
    const { organizationId } = await newOrganization(h, owner, "Unreachable");
    await files?.close();
    files = undefined;
    try {
      await h.org.getLimits({ organizationId }, await as(owner));
      expect.unreachable("GetLimits answered without the files service");
    } catch (error) {
      expect(error).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.Unavailable);
    }
    files = await startFiles();
    const limits = await h.org.getLimits({ organizationId }, await as(owner));
    expect(limits.usage?.fileStorageBytes).toBe(STORED);
  });
});
