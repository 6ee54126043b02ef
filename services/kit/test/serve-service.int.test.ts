import net from "node:net";
import { expect, it } from "vitest";
import { createLogger, serveService } from "../src/index.js";

const logger = createLogger("test", "silent");
const config = { GRPC_PORT: 0, INTERNAL_JWT_SECRET: "serve-service-secret-serve-service" };

/** Consumers and `close` that write down when they run. */
function parts(steps: string[]) {
  const consumer = (name: string) => async () => {
    steps.push(`${name} started`);
    return { stop: async () => void steps.push(`${name} stopped`) };
  };
  return {
    consumers: [consumer("a"), async () => [await consumer("b")(), await consumer("c")()]],
    close: async () => void steps.push("closed"),
  };
}

it("stops the server first, then the consumers in the order they started, then the rest", async () => {
  const steps: string[] = [];
  const service = await serveService(
    config,
    logger,
    { routes: () => {}, services: [] },
    parts(steps),
  );
  expect(steps).toEqual(["a started", "b started", "c started"]);
  const { port } = service.server;
  await service.stop();
  expect(steps.slice(3)).toEqual(["a stopped", "b stopped", "c stopped", "closed"]);
  const refused = new Promise<unknown>((resolve) =>
    net.connect(port, "127.0.0.1").once("error", resolve),
  );
  expect(await refused).toMatchObject({ code: "ECONNREFUSED" });
});

it("stops what it started and closes the rest when the server cannot start", async () => {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const { port } = taken.address() as net.AddressInfo;
  try {
    const steps: string[] = [];
    await expect(
      serveService(
        { ...config, GRPC_HOST: "127.0.0.1", GRPC_PORT: port },
        logger,
        { routes: () => {}, services: [] },
        parts(steps),
      ),
    ).rejects.toMatchObject({ code: "EADDRINUSE" });
    expect(steps).toEqual([
      "a started",
      "b started",
      "c started",
      "a stopped",
      "b stopped",
      "c stopped",
      "closed",
    ]);
  } finally {
    await new Promise<void>((resolve) => taken.close(() => resolve()));
  }
});
