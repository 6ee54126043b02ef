import { once } from "node:events";
import { createServer, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answerClientError } from "./client-error.js";

let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer((_req, res) => res.end("ok"));
  server.on("clientError", answerClientError);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Sends raw bytes and reads everything the server answers until it closes. */
async function exchange(bytes: string): Promise<string> {
  const socket = net.connect({ port, host: "127.0.0.1" });
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  await once(socket, "connect");
  socket.write(bytes);
  await once(socket, "close");
  return Buffer.concat(chunks).toString("utf8");
}

describe("answerClientError", () => {
  it("answers a request line and headers past the limit with 431 in the error envelope", async () => {
    const answer = await exchange(
      `GET /v1/x?pad=${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    );
    const [head, body] = answer.split("\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(head).toMatch(/\r\nContent-Type: application\/json; charset=utf-8(\r\n|$)/);
    expect(head).toMatch(/\r\nConnection: close(\r\n|$)/);
    expect(head).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}(\r\n|$)/);
    expect(JSON.parse(body!)).toEqual({ message: "request_header_too_large", data: {} });
  });

  it("answers bytes that are not HTTP with a bare 400", async () => {
    const answer = await exchange("NOT HTTP AT ALL\r\n\r\n");
    expect(answer).toMatch(
      /^HTTP\/1\.1 400 Bad Request\r\nConnection: close\r\nX-Request-Id: [0-9a-f-]{36}\r\n\r\n$/,
    );
  });

  it("leaves requests within the limit to the app", async () => {
    const answer = await exchange(
      `GET /?pad=${"a".repeat(8_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer.endsWith("\r\n\r\nok")).toBe(true);
  });
});
