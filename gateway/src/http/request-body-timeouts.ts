import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, type ConnectError, domainError } from "@rowbase/kit";

/**
 * How long a request's body may take, nginx's way (`client_body_timeout`): not a bound on the
 * whole body, which an upload of a gigabyte on a slow line needs hours for, but on the wait for
 * its next chunk. The idle bound alone would let a client hold a connection for ever with a
 * byte a minute, and with it whatever the request holds on the way (an upload's own connection
 * to the files service and its partial file; a JSON body's buffered text, up to 1 MiB): so past
 * its first `idleMs` a body must also keep up an average rate, as Apache's mod_reqtimeout
 * `MinRate` does, which makes every connection held cost the sender real bandwidth.
 *
 * Time only counts while the gateway reads (the request is flowing: its readers, co-body's and
 * busboy's, take `data` events or pipe): a body waiting for authentication, or held back because
 * the files service takes its bytes slowly, is not the client's delay.
 */
export interface BodyTimeouts {
  /** The longest wait for the next chunk of a body being read. */
  idleMs: number;
  /** The average a body must keep once its first `idleMs` have passed; 0: none. */
  minBytesPerSecond: number;
}

/** 408 `request_timeout`: the body stopped arriving, or arrives too slowly. */
function requestTimeout(): ConnectError {
  return domainError(Code.DeadlineExceeded, "request_timeout");
}

/** The requests being watched: each one's promise rejects when its body stalls. */
const stalls = new WeakMap<IncomingMessage, Promise<never>>();

/** RFC 9112 section 6.3: a request has a body only if it says so. */
export function hasBody(req: IncomingMessage): boolean {
  return (
    req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"]) > 0
  );
}

/**
 * Watches a request's body while anyone reads it, for the server's `request` event. A body that
 * stalls before the answer began is no longer read, the answer closes the connection, and
 * whoever reads it through `untilBodyStalls` fails with `requestTimeout()`. One that stalls
 * after the answer (Node reading what nobody read, to keep the connection) just loses it.
 */
export function watchRequestBody(
  req: IncomingMessage,
  res: ServerResponse,
  { idleMs, minBytesPerSecond }: BodyTimeouts,
): void {
  if (!hasBody(req)) return;
  const stalled = Promise.withResolvers<never>();
  stalled.promise.catch(() => {});
  stalls.set(req, stalled.promise);
  let timer: NodeJS.Timeout | undefined;
  let received = 0;
  /** The time spent reading so far, and when the current stretch of it began. */
  let readingMs = 0;
  let since: number | undefined;
  const clock = () => {
    if (since === undefined) return;
    const now = performance.now();
    readingMs += now - since;
    since = now;
  };
  const arm = () => {
    clearTimeout(timer);
    const rateLeft =
      minBytesPerSecond > 0 ? idleMs + (received * 1000) / minBytesPerSecond - readingMs : idleMs;
    timer = setTimeout(stall, Math.max(0, Math.min(idleMs, rateLeft)));
  };
  const onData = (chunk: Buffer) => {
    received += chunk.byteLength;
    // A reader before this listener may have paused on this very chunk.
    if (since === undefined) return;
    clock();
    arm();
  };
  const onResume = () => {
    // Not before the first read: a `data` listener starts the body flowing.
    if (!req.listeners("data").includes(onData)) req.on("data", onData);
    since ??= performance.now();
    arm();
  };
  const onPause = () => {
    clock();
    since = undefined;
    clearTimeout(timer);
  };
  const stop = () => {
    clearTimeout(timer);
    req.off("data", onData);
    req.off("resume", onResume);
    req.off("pause", onPause);
  };
  function stall() {
    stop();
    if (res.headersSent) {
      req.socket.destroy();
      return;
    }
    // The rest of the body is not waited for: the answer ends the connection instead.
    req.unpipe();
    req.pause();
    res.setHeader("Connection", "close");
    stalled.reject(requestTimeout());
  }
  req.on("resume", onResume);
  req.on("pause", onPause);
  req.once("end", stop);
  req.once("close", stop);
}

/** `reading` (of the request's body), unless the body stalls first: then `requestTimeout()`. */
export function untilBodyStalls<T>(req: IncomingMessage, reading: Promise<T>): Promise<T> {
  const stalled = stalls.get(req);
  return stalled ? Promise.race([reading, stalled]) : reading;
}
