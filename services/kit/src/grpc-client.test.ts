import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  FilesService,
  UploadFileResponseSchema,
} from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDedicatedServiceClient, createServiceClient } from "./grpc-client.js";

/**
 * A service's process dying mid-call, played by a raw HTTP/2 server that answers UploadFile (a
 * client-streaming call) in gRPC framing and then drops its connection at a chosen moment.
 * Whenever the connection breaks before the call's status arrived, the caller gets Unavailable
 * (the gateway's 503), also once the answer's headers and message were already read.
 */

type Ending =
  /** Headers, the answer's message and its status: a call that succeeded. */
  | "complete"
  /** Headers and the status of a refusal, as a service sends an error. */
  | "refused"
  /** The connection drops before anything was answered. */
  | "dropped before headers"
  /** Headers and the answer's message went out, then the process died before the status. */
  | "dropped before status";

let ending: Ending = "complete";
let server: http2.Http2Server;
let baseUrl: string;

function envelope(message: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.byteLength, 1);
  return Buffer.concat([head, message]);
}

beforeAll(async () => {
  server = http2.createServer();
  server.on("stream", (stream) => {
    stream.resume();
    stream.on("end", () => {
      if (ending === "dropped before headers") {
        stream.session?.destroy();
        return;
      }
      if (ending === "refused") {
        stream.respond(
          { ":status": 200, "content-type": "application/grpc+proto" },
          { waitForTrailers: true },
        );
        stream.on("wantTrailers", () =>
          stream.sendTrailers({ "grpc-status": String(Code.PermissionDenied) }),
        );
        stream.end();
        return;
      }
      stream.respond(
        { ":status": 200, "content-type": "application/grpc+proto" },
        { waitForTrailers: true },
      );
      const answer = create(UploadFileResponseSchema, { file: { fileName: "a.txt", size: 1n } });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      if (ending === "complete") {
        stream.end(envelope(toBinary(UploadFileResponseSchema, answer)));
        return;
      }
      stream.write(envelope(toBinary(UploadFileResponseSchema, answer)), () =>
        setTimeout(() => stream.session?.destroy(), 20),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function* oneHeader() {
  yield {
    payload: {
      case: "header" as const,
      value: { rowId: 1n, fieldId: 2n, fileName: "a.txt", declaredSize: 0n },
    },
  };
}

async function upload(dedicated: boolean): Promise<ConnectError | { size: bigint }> {
  const connection = dedicated
    ? createDedicatedServiceClient(FilesService, baseUrl)
    : { client: createServiceClient(FilesService, baseUrl), close: () => {} };
  try {
    const answer = await connection.client.uploadFile(oneHeader());
    return { size: answer.file?.size ?? -1n };
  } catch (error) {
    return ConnectError.from(error);
  } finally {
    connection.close();
  }
}

describe.each([false, true])(
  "a streaming call's connection breaking (dedicated: %s)",
  (dedicated) => {
    it("a complete answer is the answer", async () => {
      ending = "complete";
      expect(await upload(dedicated)).toEqual({ size: 1n });
    });

    it("a service's refusal keeps its code", async () => {
      ending = "refused";
      const answer = await upload(dedicated);
      expect(answer).toBeInstanceOf(ConnectError);
      expect((answer as ConnectError).code).toBe(Code.PermissionDenied);
    });

    it("dropped before any answer: Unavailable", async () => {
      ending = "dropped before headers";
      const answer = await upload(dedicated);
      expect(answer).toBeInstanceOf(ConnectError);
      expect((answer as ConnectError).code).toBe(Code.Unavailable);
    });

    it("dropped after the headers and the message, before the status: Unavailable", async () => {
      ending = "dropped before status";
      const answer = await upload(dedicated);
      expect(answer).toBeInstanceOf(ConnectError);
      expect((answer as ConnectError).code, (answer as ConnectError).message).toBe(
        Code.Unavailable,
      );
    });
  },
);
