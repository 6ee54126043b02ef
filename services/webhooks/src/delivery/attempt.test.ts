import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AllowedTargets } from "../domain/address-policy.js";
import { newSecret, signedHeaders } from "../domain/signature.js";
import { ANSWER_READ_MAX_BYTES, attemptDelivery, USER_AGENT } from "./attempt.js";

// A receiver on loopback only: no attempt here ever leaves the machine.

let server: Server;
let port: number;
const received: { headers: IncomingMessage["headers"]; body: string }[] = [];
let answer: (response: ServerResponse) => void = (response) => response.end("ok");

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const secret = newSecret();
const body = JSON.stringify({ type: "record.created", row_id: 1 });
const headers = () => signedHeaders([secret], "chg_1", Math.floor(Date.now() / 1000), body);

describe("a delivery attempt", () => {
  it("refuses a loopback target by default, by literal address and by name", async () => {
    const before = received.length;
    for (const url of [
      `http://127.0.0.1:${port}/hook`,
      `http://localhost:${port}/hook`,
      `http://[::ffff:127.0.0.1]:${port}/hook`,
    ]) {
      const outcome = await attemptDelivery({
        url,
        body,
        headers: headers(),
        allowed: AllowedTargets.none(),
        timeoutMs: 5_000,
      });
      expect(outcome, url).toMatchObject({ error: "address_forbidden" });
      expect(outcome.status).toBeUndefined();
    }
    expect(received.length).toBe(before);
  });

  it("delivers to a target WEBHOOK_ALLOWED_TARGETS lists, signed as Standard Webhooks says", async () => {
    answer = (response) => response.end("thanks");
    for (const [url, setting] of [
      [`http://127.0.0.1:${port}/hook`, "127.0.0.1"],
      [`http://localhost:${port}/hook`, `localhost:${port}`],
    ] as const) {
      const outcome = await attemptDelivery({
        url,
        body,
        headers: headers(),
        allowed: AllowedTargets.parse(setting),
        timeoutMs: 5_000,
      });
      expect(outcome, url).toMatchObject({ status: 200 });
      expect(outcome.body.toString()).toBe("thanks");
      const last = received.at(-1)!;
      expect(last.headers["user-agent"]).toBe(USER_AGENT);
      expect(last.headers["content-type"]).toBe("application/json");
      expect(new Webhook(secret).verify(last.body, last.headers as Record<string, string>)).toEqual(
        JSON.parse(body),
      );
    }
  });

  it("follows no redirect and reads at most 64 KiB of an answer", async () => {
    const allowed = AllowedTargets.parse("127.0.0.1");
    answer = (response) => {
      response.writeHead(302, { location: "http://127.0.0.1:1/elsewhere" });
      response.end();
    };
    const before = received.length;
    const redirected = await attemptDelivery({
      url: `http://127.0.0.1:${port}/hook`,
      body,
      headers: headers(),
      allowed,
      timeoutMs: 5_000,
    });
    expect(redirected.status).toBe(302);
    expect(received.length).toBe(before + 1);

    answer = (response) => response.end(Buffer.alloc(1024 * 1024, 120));
    const large = await attemptDelivery({
      url: `http://127.0.0.1:${port}/hook`,
      body,
      headers: headers(),
      allowed,
      timeoutMs: 5_000,
    });
    expect(large.status).toBe(200);
    expect(large.body.length).toBe(ANSWER_READ_MAX_BYTES);
  });

  it("gives up on an answer that takes longer than the timeout", async () => {
    answer = () => {};
    const outcome = await attemptDelivery({
      url: `http://127.0.0.1:${port}/hook`,
      body,
      headers: headers(),
      allowed: AllowedTargets.parse("127.0.0.1"),
      timeoutMs: 200,
    });
    expect(outcome).toMatchObject({ error: "timeout" });
    server.closeAllConnections();
  });
});
