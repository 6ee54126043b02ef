import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

/** One request a receiver got. */
export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The status it was answered with. */
  answered: number;
}

/**
 * A webhook receiver on loopback that keeps every request it gets and answers with what
 * `answer` says (200 unless told). `verify` checks a request's signature with the Standard
 * Webhooks reference library, not with Rowbase's code.
 */
export async function startReceiver() {
  const received: Received[] = [];
  let answer: (request: { path: string; body: string }) => number = () => 200;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const path = req.url ?? "";
      const status = answer({ path, body });
      received.push({ path, headers: req.headers, body, answered: status });
      res.writeHead(status, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: (path = "/hook") => `http://127.0.0.1:${port}${path}`,
    received,
    /** How requests are answered from now on. */
    answer(next: typeof answer) {
      answer = next;
    },
    /** The requests to a path. */
    at(path: string) {
      return received.filter((request) => request.path === path);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The payload of a request, verified with `secret` by the reference library; throws if not. */
export function verified(secret: string, request: Received): unknown {
  return new Webhook(secret).verify(request.body, {
    "webhook-id": request.headers["webhook-id"] as string,
    "webhook-timestamp": request.headers["webhook-timestamp"] as string,
    "webhook-signature": request.headers["webhook-signature"] as string,
  });
}
