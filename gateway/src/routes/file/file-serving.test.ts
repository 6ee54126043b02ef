import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { createLogger } from "@rowbase/kit";
import {
  ContentDisposition,
  FileInfoSchema,
  FileServeHeaderSchema,
} from "@rowbase/proto/rowbase/files/v1/files_pb";
import Koa from "koa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorMiddleware } from "../../errors/error-middleware.js";
import type { GatewayState } from "../../gateway-context.js";
import { requestId } from "../../middleware/request-id.js";
import { type ServeMessage, type ServeMeter, sendFile } from "./file-serving.js";

/**
 * sendFile over real HTTP, against a files stream that sends the file's bytes and then keeps its
 * end waiting, as a slow trailer or a busy service does.
 */

const BYTES = Buffer.from("hello world");

interface Served {
  /** The response went out whole (`finish`), or the connection closed before it did. */
  outcome?: "finished" | "closed";
  /** The files call was cancelled once its bytes were sent. */
  streamCancelled: boolean;
  /** The transfer was settled (its count final) when the response finished. */
  settledAtFinish?: boolean;
  settled: boolean;
}

let server: Server;
let base: string;
const served: Served[] = [];
const appErrors: unknown[] = [];

/** The header and the bytes, then nothing until the call is cancelled. */
async function* lingeringStream(signal: AbortSignal, record: Served): AsyncGenerator<ServeMessage> {
  signal.addEventListener("abort", () => {
    record.streamCancelled = true;
  });
  const file = create(FileInfoSchema, {
    rowId: 1n,
    fieldId: 2n,
    fileName: "hello.txt",
    contentType: "text/plain",
    size: BigInt(BYTES.length),
    sha256: "a".repeat(64),
  });
  yield {
    payload: {
      case: "header",
      value: create(FileServeHeaderSchema, {
        file,
        organizationId: 7n,
        disposition: ContentDisposition.INLINE,
      }),
    },
  };
  yield { payload: { case: "chunk", value: new Uint8Array(BYTES) } };
  await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
}

function meterOf(record: Served): ServeMeter {
  return {
    admit: async () => {},
    count: () => {},
    settle: async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      record.settled = true;
    },
    cancel: async () => {},
  };
}

beforeAll(async () => {
  const app = new Koa<GatewayState>();
  app.on("error", (error: unknown) => appErrors.push(error));
  app.use(requestId(createLogger("test", "silent")));
  app.use(errorMiddleware());
  app.use(async (ctx) => {
    const record: Served = { streamCancelled: false, settled: false };
    served.push(record);
    ctx.res.once("finish", () => {
      record.outcome ??= "finished";
      record.settledAtFinish = record.settled;
    });
    ctx.res.once("close", () => {
      record.outcome ??= "closed";
    });
    await sendFile(ctx, {
      open: (_range, signal) => lingeringStream(signal, record),
      meter: async () => meterOf(record),
      headerTimeoutMs: 5_000,
    });
  });
  server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe("sendFile", () => {
  it("ends the response with its last byte, the transfer settled, not when the stream ends", async () => {
    const response = await fetch(`${base}/file/serve`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-length")).toBe(String(BYTES.length));
    expect(Buffer.from(await response.arrayBuffer()).equals(BYTES)).toBe(true);

    // The connection stays open (keep-alive): the response must still finish on its own.
    const record = served.at(-1)!;
    await until(() => record.outcome !== undefined && record.streamCancelled);
    expect(record).toMatchObject({
      outcome: "finished",
      streamCancelled: true,
      settledAtFinish: true,
    });
    expect(appErrors).toEqual([]);
  });
});
