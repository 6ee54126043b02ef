import { randomBytes } from "node:crypto";
import http from "node:http";
import net from "node:net";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  counted,
  fileTable,
  pair,
  partialFiles,
  raw,
  sha256,
  storageUsage,
  storedFiles,
} from "./support/files.js";
import { client } from "./support/http.js";
import { expectError } from "./support/organizations.js";
import {
  createTenant,
  list,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * Clients that send slowly, against a gateway with short request timeouts: a body that keeps
 * arriving is read however long it takes as a whole, one that stops (or crawls below the
 * minimum rate) is answered 408 `request_timeout` and stores nothing, and headers that do not
 * arrive in time are cut.
 */

const IDLE_MS = 1_000;
const MIN_BYTES_PER_SECOND = 200;
const HEADERS_MS = 1_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let sys: TestSystem;
let tenant: Tenant;
let table: TestTable;
let fieldId: number;
let rowIds: number[];

beforeAll(async () => {
  sys = await startTestSystem({
    RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
    REQUEST_BODY_IDLE_TIMEOUT_MS: String(IDLE_MS),
    REQUEST_BODY_MIN_BYTES_PER_SECOND: String(MIN_BYTES_PER_SECOND),
    REQUEST_HEADERS_TIMEOUT_MS: String(HEADERS_MS),
  });
  const api = client(sys.baseUrl);
  tenant = await createTenant(sys, api, { plan: "business" });
  ({ table, fieldId, rowIds } = await fileTable(api, tenant, 4));
});

afterAll(async () => {
  await sys?.stop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  // biome-ignore lint/suspicious/noExplicitAny: tests inspect response bodies freely
  json: any;
  /** Settles when the connection is closed. */
  closed: Promise<void>;
}

/**
 * POSTs a body in `pieces`, `gapMs` apart, on a connection of its own; `end` false leaves the
 * request unfinished after the last piece (a client that stalls). Stops sending once answered.
 */
async function send(
  pathAndQuery: string,
  headers: Record<string, string>,
  pieces: Buffer[],
  { gapMs, end }: { gapMs: number; end: boolean },
): Promise<Answer> {
  // A client that would keep the connection: only the gateway's choice can close it.
  const request = http.request(new URL(pathAndQuery, sys.baseUrl), {
    method: "POST",
    headers: { connection: "keep-alive", ...headers },
    agent: false,
  });
  request.on("error", () => {});
  const closed = new Promise<void>((resolve) =>
    request.once("socket", (socket) => socket.once("close", () => resolve())),
  );
  let answered = false;
  const response = new Promise<http.IncomingMessage>((resolve) =>
    request.once("response", (res) => {
      answered = true;
      resolve(res);
    }),
  );
  request.flushHeaders();
  for (const [index, piece] of pieces.entries()) {
    if (answered) break;
    request.write(piece);
    if (index < pieces.length - 1) await sleep(gapMs);
  }
  if (end) request.end();
  const res = await response;
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.statusCode ?? 0, headers: res.headers, json, closed };
}

/**
 * An upload's multipart body around `content`, cut into pieces: its first `firstBytes`, then
 * pieces of `pieceBytes`.
 */
function multipart(content: Buffer, firstBytes: number, pieceBytes: number) {
  const boundary = "----slow";
  const body = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\n` +
        "Content-Type: application/octet-stream\r\n\r\n",
    ),
    content,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const pieces = [body.subarray(0, firstBytes)];
  for (let offset = firstBytes; offset < body.length; offset += pieceBytes) {
    pieces.push(body.subarray(offset, offset + pieceBytes));
  }
  return {
    pieces,
    headers: {
      authorization: `Bearer ${tenant.writeToken}`,
      "content-type": `multipart/form-data; boundary=${boundary}`,
      "content-length": String(body.length),
    },
  };
}

/** An answer of 408 `request_timeout` that closed its connection. */
async function expectTimedOut(answer: Answer) {
  expectError({ status: answer.status, body: answer.json }, 408, "request_timeout");
  expect(answer.headers.connection).toBe("close");
  await answer.closed;
}

/** What the stores hold and count, to compare before and after an upload. */
async function holdings() {
  return {
    files: (await storedFiles(sys.filesDir)).length,
    storage: await storageUsage(sys, tenant),
    transfer: await counted(sys, "transfer", tenant.orgId),
  };
}

/** The pair has no file; no bytes were stored, kept partially, or counted as moved. */
async function expectNothingStored(rowId: number, before: Awaited<ReturnType<typeof holdings>>) {
  const served = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
    token: tenant.writeToken,
  });
  expectError({ status: served.status, body: served.json }, 404, "file_not_found");
  await expect.poll(() => partialFiles(sys.filesDir)).toBe(0);
  await expect.poll(holdings).toEqual(before);
}

describe("a slow upload", () => {
  it("is stored whole when its chunks keep coming, however long it takes", async () => {
    const rowId = rowIds[0]!;
    const content = randomBytes(30 * 1_000);
    // Thirty-odd pieces 100 ms apart: three times the idle bound in all, never idle for it.
    const { pieces, headers } = multipart(content, 1_000, 1_000);
    const answer = await send(`/file/upload?${pair(rowId, fieldId)}`, headers, pieces, {
      gapMs: 100,
      end: true,
    });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json.data.file).toMatchObject({ size: content.length, sha256: sha256(content) });
    const served = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
    });
    expect(served.status).toBe(200);
    expect(served.bytes.equals(content)).toBe(true);
  });

  it("is abandoned with 408 when it stalls, storing nothing", async () => {
    const rowId = rowIds[1]!;
    const before = await holdings();
    const { pieces, headers } = multipart(randomBytes(150_000), 50_000, 50_000);
    // The head and the first 100,000 bytes, then nothing.
    const answer = await send(`/file/upload?${pair(rowId, fieldId)}`, headers, pieces.slice(0, 2), {
      gapMs: 100,
      end: false,
    });
    await expectTimedOut(answer);
    await expectNothingStored(rowId, before);
  });

  it("is abandoned with 408 when it crawls below the minimum rate, storing nothing", async () => {
    const rowId = rowIds[2]!;
    const before = await holdings();
    // The head and the start of the file, then ten bytes a second, never idle for the idle
    // bound: only the rate stops it.
    const { pieces, headers } = multipart(randomBytes(1_000), 300, 1);
    const answer = await send(`/file/upload?${pair(rowId, fieldId)}`, headers, pieces, {
      gapMs: 100,
      end: true,
    });
    await expectTimedOut(answer);
    await expectNothingStored(rowId, before);
  });
});

describe("a JSON body that stalls", () => {
  it("is answered 408 and creates nothing", async () => {
    const body = Buffer.from(JSON.stringify({ records: [{ data: { Title: "never" } }] }));
    const before = await list(client(sys.baseUrl), tenant.readToken, table);
    const answer = await send(
      v1(table.databaseId, table.tableId).batch,
      {
        authorization: `Bearer ${tenant.writeToken}`,
        "content-type": "application/json",
        "content-length": String(body.length),
      },
      [body.subarray(0, 10)],
      { gapMs: 0, end: false },
    );
    await expectTimedOut(answer);
    const after = await list(client(sys.baseUrl), tenant.readToken, table);
    expect(after.total).toBe(before.total);
    expect(after.records.map((record) => record.data)).not.toContainEqual({ Title: "never" });
  });
});

describe("a body nobody reads", () => {
  it("loses its connection when it stalls after the answer", async () => {
    // No route takes POST /health: the answer goes out before the body arrived, and Node goes
    // on reading the body to keep the connection.
    const answer = await send(
      "/health",
      { "content-type": "application/json", "content-length": "100" },
      [Buffer.from('{"a":')],
      { gapMs: 0, end: false },
    );
    expectError({ status: answer.status, body: answer.json }, 405, "method_not_allowed");
    await answer.closed;
  });
});

describe("headers trickled past their bound", () => {
  it("are cut with 408 in the error envelope", async () => {
    const socket = net.connect(Number(new URL(sys.baseUrl).port), "127.0.0.1");
    socket.on("error", () => {});
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    const closed = new Promise((resolve) => socket.once("close", resolve));
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write("GET /health HTTP/1.1\r\nHost: gateway\r\n");
    // A header line every 100 ms, never the blank line that ends them.
    let line = 0;
    const trickle = setInterval(() => {
      if (socket.writable) socket.write(`X-Slow-${line++}: x\r\n`);
    }, 100);
    try {
      await closed;
    } finally {
      clearInterval(trickle);
    }
    const [head = "", body = ""] = Buffer.concat(chunks).toString("utf8").split("\r\n\r\n");
    expect(head.split("\r\n")[0]).toBe("HTTP/1.1 408 Request Timeout");
    expect(head.toLowerCase()).toContain("connection: close");
    expect(JSON.parse(body)).toEqual({ message: "request_timeout", data: {} });
  });
});
