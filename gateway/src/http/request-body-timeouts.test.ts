import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { errorInfoOf } from "@rowbase/kit";
import { afterEach, describe, expect, it } from "vitest";
import { untilBodyStalls, watchRequestBody } from "./request-body-timeouts.js";

/**
 * The body bound over real HTTP on a bare Node server: only the client's delays count, never
 * the time the server takes before or between its reads. The gateway's answers to stalled
 * bodies are in test/e2e/slow-clients.e2e.test.ts.
 */

const IDLE_MS = 200;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let server: http.Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** A server that watches bodies and reads them with `read`, answering what it read. */
async function serve(
  read: (req: IncomingMessage) => Promise<Buffer>,
  minBytesPerSecond = 0,
): Promise<string> {
  server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    watchRequestBody(req, res, { idleMs: IDLE_MS, minBytesPerSecond });
    untilBodyStalls(req, read(req)).then(
      (body) => res.end(body),
      (error: unknown) => {
        res.statusCode = 408;
        res.end(errorInfoOf(error)?.reason ?? String(error));
      },
    );
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Reads a body in flowing mode, as the gateway's readers do. */
function collect(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => req.once("end", () => resolve(Buffer.concat(chunks))));
}

/** POSTs the body in two halves `gapMs` apart. */
async function post(url: string, body: string, gapMs: number) {
  const request = http.request(url, {
    method: "POST",
    headers: { "content-length": String(Buffer.byteLength(body)) },
    agent: false,
  });
  const response = new Promise<http.IncomingMessage>((resolve, reject) => {
    request.once("response", resolve);
    request.once("error", reject);
  });
  const half = Math.floor(body.length / 2);
  request.write(body.slice(0, half));
  await sleep(gapMs);
  request.end(body.slice(half));
  const res = await response;
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return { status: res.statusCode, text: Buffer.concat(chunks).toString("utf8") };
}

describe("the body bound", () => {
  it("does not count the time before the server reads", async () => {
    const url = await serve(async (req) => {
      await sleep(3 * IDLE_MS);
      return collect(req);
    });
    expect(await post(url, "x".repeat(1000), 10)).toEqual({ status: 200, text: "x".repeat(1000) });
  });

  it("does not count the time the server holds its reading back", async () => {
    const url = await serve(async (req) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => {
        chunks.push(chunk);
        if (chunks.length === 1) {
          req.pause();
          setTimeout(() => req.resume(), 3 * IDLE_MS);
        }
      });
      await new Promise((resolve) => req.once("end", resolve));
      return Buffer.concat(chunks);
    }, 1_000);
    expect(await post(url, "y".repeat(1000), 50)).toEqual({ status: 200, text: "y".repeat(1000) });
  });

  it("rejects a read whose body stops arriving with request_timeout", async () => {
    const url = await serve(collect);
    expect(await post(url, "z".repeat(1000), 3 * IDLE_MS)).toEqual({
      status: 408,
      text: "request_timeout",
    });
  });
});
