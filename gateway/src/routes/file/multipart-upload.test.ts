import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { ConnectError } from "@connectrpc/connect";
import { Code, createLogger, domainError } from "@rowbase/kit";
import Koa from "koa";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { errorMiddleware } from "../../errors/error-middleware.js";
import type { GatewayState } from "../../gateway-context.js";
import { requestId } from "../../middleware/request-id.js";
import {
  type ChunkHooks,
  MULTIPART_FRAMING_BYTES,
  receiveUpload,
  UPLOAD_ABANDONED,
  UPLOAD_CHUNK_BYTES,
  type UploadSink,
} from "./multipart-upload.js";

/**
 * receiveUpload behind the gateway's error middleware, over real HTTP, with a sink that records
 * what reached it: the bytes, their chunking, and whether its input ended (the service would
 * commit) or failed (it would store nothing).
 */

const MAX_BYTES = 100 * 1024;

interface SinkRecord {
  fileName: string;
  chunks: number[];
  bytes: Buffer[];
  outcome: "pending" | "committed" | "aborted";
}

interface Behaviour {
  /** Refuses before reading a byte, as the service does for a read-only token. */
  refuseAtStart?: boolean;
  /** Refuses once more than this many bytes arrived, as the service does past the plan. */
  refuseAfter?: number;
  /**
   * Loses its connection after the first chunk, as the files service killed mid-upload: Connect
   * throws the transport's error into the input (`pipeTo`), and the call fails with what kit's
   * transport interceptor made of it.
   */
  connectionLost?: boolean;
  hooks?: ChunkHooks;
}

let server: Server;
let base: string;
const sinks: SinkRecord[] = [];
let behaviour: Behaviour = {};

const sink: UploadSink<{ file_name: string; size: number; sha256: string }> = async ({
  fileName,
  chunks,
}) => {
  const record: SinkRecord = { fileName, chunks: [], bytes: [], outcome: "pending" };
  sinks.push(record);
  if (behaviour.refuseAtStart) {
    record.outcome = "aborted";
    throw domainError(Code.PermissionDenied, "token_read_only");
  }
  if (behaviour.connectionLost) {
    const input = chunks[Symbol.asyncIterator]();
    await input.next();
    await input
      .throw?.(new ConnectError("http/2 stream closed with error code CANCEL", Code.Canceled))
      .catch(() => undefined);
    record.outcome = "aborted";
    throw new ConnectError("connection to the service failed", Code.Unavailable);
  }
  try {
    let size = 0;
    for await (const chunk of chunks) {
      // As the files service refuses a second header.
      if (chunk === UPLOAD_ABANDONED) throw domainError(Code.InvalidArgument, "validation_failed");
      size += chunk.byteLength;
      record.chunks.push(chunk.byteLength);
      record.bytes.push(Buffer.from(chunk));
      if (behaviour.refuseAfter !== undefined && size > behaviour.refuseAfter) {
        throw domainError(Code.InvalidArgument, "file_too_large");
      }
    }
    record.outcome = "committed";
    const all = Buffer.concat(record.bytes);
    return {
      file_name: fileName,
      size: all.length,
      sha256: createHash("sha256").update(all).digest("hex"),
    };
  } catch (error) {
    record.outcome = "aborted";
    throw error;
  }
};

beforeAll(async () => {
  const app = new Koa<GatewayState>();
  app.use(requestId(createLogger("test", "silent")));
  app.use(errorMiddleware());
  app.use(async (ctx) => {
    ctx.body = await receiveUpload(ctx, {
      partName: "file",
      maxBytes: MAX_BYTES,
      sink,
      hooks: behaviour.hooks ?? {},
      answerTimeoutMs: 5_000,
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

beforeEach(() => {
  sinks.length = 0;
  behaviour = {};
});

interface Part {
  name: string;
  /** Absent: a text field (no filename). */
  filename?: string;
  content: Buffer | string;
  type?: string;
}

const BOUNDARY = "----rowbase-test-boundary";

function multipart(parts: Part[]): Buffer {
  const pieces: Buffer[] = [];
  for (const part of parts) {
    const disposition =
      part.filename === undefined
        ? `form-data; name="${part.name}"`
        : `form-data; name="${part.name}"; filename="${part.filename}"`;
    const type =
      part.type ?? (part.filename === undefined ? undefined : "application/octet-stream");
    pieces.push(
      Buffer.from(
        `--${BOUNDARY}\r\nContent-Disposition: ${disposition}\r\n` +
          (type ? `Content-Type: ${type}\r\n` : "") +
          "\r\n",
      ),
      Buffer.from(part.content),
      Buffer.from("\r\n"),
    );
  }
  pieces.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(pieces);
}

async function post(
  body: Buffer | string,
  contentType = `multipart/form-data; boundary=${BOUNDARY}`,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${base}/file/upload`, {
    method: "POST",
    headers: { "content-type": contentType, ...headers },
    body,
  });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) };
  } catch {
    return { status: response.status, body: text };
  }
}

const invalid = (key: string, message: string, source = "body", code = "invalid_value") => ({
  status: 400,
  body: {
    status_code: 400,
    detail: "Validation failed for POST /file/upload",
    extra: [{ key, message, source, code }],
  },
});

/** Lets a cancelled sink finish recording. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe("receiveUpload", () => {
  it("streams one part named file into the sink in chunks of at most 64 KiB", async () => {
    const content = randomBytes(MAX_BYTES);
    const response = await post(multipart([{ name: "file", filename: "Grüße.png", content }]));
    expect(response).toEqual({
      status: 200,
      body: {
        file_name: "Grüße.png",
        size: MAX_BYTES,
        sha256: createHash("sha256").update(content).digest("hex"),
      },
    });
    expect(sinks).toHaveLength(1);
    expect(sinks[0]!.outcome).toBe("committed");
    expect(Math.max(...sinks[0]!.chunks)).toBeLessThanOrEqual(UPLOAD_CHUNK_BYTES);
    expect(sinks[0]!.chunks.reduce((a, b) => a + b, 0)).toBe(MAX_BYTES);
  });

  it("takes an empty file", async () => {
    const response = await post(multipart([{ name: "file", filename: "empty.txt", content: "" }]));
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ file_name: "empty.txt", size: 0 });
  });

  it("refuses a part with another name, and stores nothing", async () => {
    const response = await post(multipart([{ name: "upload", filename: "a.txt", content: "x" }]));
    expect(response).toEqual(
      invalid("upload", "is not expected: send one part named file", "body", "unknown_key"),
    );
    expect(sinks.filter((s) => s.outcome === "committed")).toEqual([]);
  });

  it("refuses two parts even after the first streamed, and stores nothing", async () => {
    const response = await post(
      multipart([
        { name: "file", filename: "a.bin", content: randomBytes(70_000) },
        { name: "file", filename: "b.bin", content: "second" },
      ]),
    );
    expect(response).toEqual(invalid("file", "must be the only part"));
    await settle();
    expect(sinks).toHaveLength(1);
    expect(sinks[0]!.outcome).toBe("aborted");
  });

  it("refuses a file with another part of another name after it", async () => {
    const response = await post(
      multipart([
        { name: "file", filename: "a.bin", content: "first" },
        { name: "other", filename: "b.bin", content: "second" },
      ]),
    );
    expect(response.status).toBe(400);
    await settle();
    expect(sinks.map((s) => s.outcome)).toEqual(["aborted"]);
  });

  it("refuses text fields, before or after the file", async () => {
    const field = { name: "note", content: "hello" };
    const file = { name: "file", filename: "a.txt", content: "x" };
    for (const parts of [[field, file], [file, field], [{ name: "file", content: "text" }]]) {
      const response = await post(multipart(parts));
      expect(response).toEqual(
        invalid("file", "must be the only part, and a file (a part with a filename)"),
      );
    }
    await settle();
    expect(sinks.filter((s) => s.outcome === "committed")).toEqual([]);
  });

  it("passes a path-like filename on as sent, for the files service to reduce to a label", async () => {
    for (const fileName of ["..", ".", "uploads/", "../../..", "C:\\fakepath\\x.png"]) {
      const response = await post(multipart([{ name: "file", filename: fileName, content: "x" }]));
      expect(response, fileName).toEqual({
        status: 200,
        body: expect.objectContaining({ file_name: fileName, size: 1 }),
      });
    }
    expect(sinks.map((s) => s.outcome)).toEqual(Array(5).fill("committed"));
  });

  it("asks for the part when there is none (or it has no filename)", async () => {
    for (const body of [multipart([]), multipart([{ name: "file", filename: "", content: "x" }])]) {
      expect(await post(body)).toEqual(
        invalid(
          "file",
          "is required: send one part named file with a filename",
          "body",
          "required",
        ),
      );
    }
    expect(sinks).toEqual([]);
  });

  it("cuts a part past the ceiling mid-stream with 413, and stores nothing", async () => {
    const response = await post(
      multipart([{ name: "file", filename: "big.bin", content: randomBytes(3 * MAX_BYTES) }]),
    );
    expect(response).toEqual({ status: 413, body: { message: "file_too_large", data: {} } });
    await settle();
    expect(sinks).toHaveLength(1);
    expect(sinks[0]!.outcome).toBe("aborted");
    // The sink never saw more than the ceiling and a chunk.
    const seen = sinks[0]!.chunks.reduce((a, b) => a + b, 0);
    expect(seen).toBeLessThanOrEqual(MAX_BYTES + 1);
  });

  it("holds the whole body to the ceiling: bytes before or after the part count too, 413", async () => {
    const small = multipart([{ name: "file", filename: "a.txt", content: "x" }]);
    const padding = Buffer.alloc(MAX_BYTES + MULTIPART_FRAMING_BYTES, "E");
    for (const body of [
      Buffer.concat([small, padding]),
      Buffer.concat([padding, Buffer.from("\r\n"), small]),
    ]) {
      const response = await post(body);
      expect(response).toEqual({ status: 413, body: { message: "file_too_large", data: {} } });
    }
    await settle();
    expect(sinks.filter((s) => s.outcome !== "aborted")).toEqual([]);
  });

  it("takes a file of exactly the ceiling", async () => {
    const response = await post(
      multipart([{ name: "file", filename: "max.bin", content: randomBytes(MAX_BYTES) }]),
    );
    expect(response.status).toBe(200);
  });

  it("refuses a body that is not multipart/form-data", async () => {
    expect(await post('{"file": "x"}', "application/json")).toEqual(
      invalid("content-type", "must be multipart/form-data", "header"),
    );
    expect(await post("x", "text/plain")).toEqual(
      invalid("content-type", "must be multipart/form-data", "header"),
    );
  });

  it("refuses a compressed body, which it would store as sent, and stores nothing", async () => {
    const body = multipart([{ name: "file", filename: "a.txt", content: "plain" }]);
    for (const encoding of ["gzip", "br, gzip", "deflate"]) {
      expect(await post(body, undefined, { "content-encoding": encoding })).toEqual(
        invalid("content-encoding", "must be identity: uploads are not decoded", "header"),
      );
    }
    expect(sinks).toEqual([]);
    expect((await post(body, undefined, { "content-encoding": "identity" })).status).toBe(200);
  });

  it("refuses malformed multipart as the 400 validation shape", async () => {
    const noBoundary = await post(multipart([]), "multipart/form-data");
    expect(noBoundary.status).toBe(400);
    expect(noBoundary.body).toMatchObject({ extra: [{ key: "body", source: "body" }] });
    const cut = multipart([{ name: "file", filename: "a.txt", content: "abc" }]).subarray(0, 80);
    const truncated = await post(cut);
    expect(truncated.status).toBe(400);
    await settle();
    expect(sinks.filter((s) => s.outcome === "committed")).toEqual([]);
  });

  it("passes the sink's refusal on, whether at the start or mid-stream", async () => {
    behaviour = { refuseAtStart: true };
    const content = randomBytes(90_000);
    expect(await post(multipart([{ name: "file", filename: "a.bin", content }]))).toEqual({
      status: 403,
      body: { message: "token_read_only", data: {} },
    });
    behaviour = { refuseAfter: 10_000 };
    expect(await post(multipart([{ name: "file", filename: "a.bin", content }]))).toEqual({
      status: 413,
      body: { message: "file_too_large", data: {} },
    });
    expect(sinks.map((s) => s.outcome)).toEqual(["aborted", "aborted"]);
  });

  it("answers the call's own error when its connection is lost mid-stream, not the one thrown into the input", async () => {
    behaviour = { connectionLost: true };
    const content = randomBytes(3 * UPLOAD_CHUNK_BYTES);
    expect(await post(multipart([{ name: "file", filename: "a.bin", content }]))).toEqual({
      status: 503,
      body: { message: "service_unavailable", data: {} },
    });
    expect(sinks.map((s) => s.outcome)).toEqual(["aborted"]);
  });

  it("lets the chunk hooks meter the bytes and refuse them mid-stream", async () => {
    const counted: number[] = [];
    let admitted = 0;
    behaviour = {
      hooks: {
        async before(bytes) {
          admitted += bytes;
          if (admitted > 50_000) {
            throw domainError(Code.ResourceExhausted, "transfer_limit_exceeded");
          }
        },
        after: (bytes) => counted.push(bytes),
      },
    };
    const small = await post(multipart([{ name: "file", filename: "a", content: "x".repeat(10) }]));
    expect(small.status).toBe(200);
    expect(counted).toEqual([10]);
    const response = await post(
      multipart([{ name: "file", filename: "b", content: randomBytes(80_000) }]),
    );
    expect(response).toEqual({
      status: 403,
      body: { message: "transfer_limit_exceeded", data: {} },
    });
    await settle();
    expect(sinks.map((s) => s.outcome)).toEqual(["committed", "aborted"]);
  });
});
