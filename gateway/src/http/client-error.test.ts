import { once } from "node:events";
import { createServer, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answerClientError, answerConnect } from "./client-error.js";

let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer((_req, res) => res.end("ok"));
  server.on("clientError", answerClientError);
  server.on("connect", answerConnect);
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

/** An answer in the error envelope, with the headers every gateway answer has. */
function expectEnvelope(answer: string, status: number, code: string, what = code): void {
  const [head, body] = answer.split("\r\n\r\n");
  expect(head, what).toMatch(new RegExp(`^HTTP/1\\.1 ${status} [A-Za-z ]+\r\n`));
  expect(head, what).toMatch(/\r\nContent-Type: application\/json; charset=utf-8(\r\n|$)/);
  expect(head, what).toMatch(/\r\nConnection: close(\r\n|$)/);
  expect(head, what).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}(\r\n|$)/);
  expect(head, what).toMatch(/\r\nCache-Control: no-store(\r\n|$)/);
  expect(head, what).toMatch(/\r\nX-Content-Type-Options: nosniff(\r\n|$)/);
  expect(JSON.parse(body!), what).toEqual({ message: code, data: {} });
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

  it("answers a method the parser does not know with 405 in the error envelope", async () => {
    // Bytes that are not HTTP at all mostly begin with what the parser reads as a method.
    for (const line of ["FOO / HTTP/1.1", "get /health HTTP/1.1", "NOT HTTP AT ALL"]) {
      expectEnvelope(await exchange(`${line}\r\nHost: x\r\n\r\n`), 405, "method_not_allowed");
    }
  });

  it("answers CONNECT, which Node hands over as a socket, with 405 in the error envelope", async () => {
    expectEnvelope(
      await exchange("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
      405,
      "method_not_allowed",
    );
  });

  it("answers every other refusal of the parser with 400 malformed_request", async () => {
    for (const request of [
      "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET / HTTP/9.9\r\nHost: x\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: x\r\nX-Thing: a\u0001b\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    ]) {
      expectEnvelope(await exchange(request), 400, "malformed_request", request);
    }
  });

  it("leaves requests within the limit to the app", async () => {
    const answer = await exchange(
      `GET /?pad=${"a".repeat(8_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer.endsWith("\r\n\r\nok")).toBe(true);
  });
});
