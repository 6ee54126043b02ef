import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import { ERROR_STATUS } from "../errors/error-table.js";

/** What Node's HTTP parser reports, with the code that says which refusal it was. */
type ParserError = Error & { code?: string };

/** The status lines Node itself answers with, for what the parser refuses. */
const REASONS: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
};

function statusOf(code: string | undefined): number {
  if (code === "HPE_HEADER_OVERFLOW") return ERROR_STATUS.request_header_too_large;
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") return 408;
  return 400;
}

/**
 * Answers what Node's HTTP parser refuses before the app sees a request (the server's
 * `clientError`). Node's own answer is a bare status line; a request line and headers past
 * Node's limit (16 KiB, a long `where` in a URL, say) get the error envelope instead:
 * 431 `request_header_too_large`. Each answer carries a new `X-Request-Id`. Other refusals (bytes that are not HTTP, a request that
 * never finished) keep Node's bare 400 and 408: there is no request to name in them. A socket
 * that is already gone, or that is in the middle of an answer, is only closed.
 */
export function answerClientError(error: ParserError, socket: Duplex): void {
  const busy = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (error.code === "ECONNRESET" || !socket.writable || busy?.headersSent) {
    socket.destroy();
    return;
  }
  const status = statusOf(error.code);
  // Every answer names a request id (SPEC section 1); the request's own could not be read.
  const head = `HTTP/1.1 ${status} ${REASONS[status]}\r\nConnection: close\r\nX-Request-Id: ${randomUUID()}\r\n`;
  if (status !== ERROR_STATUS.request_header_too_large) {
    socket.end(`${head}\r\n`);
    return;
  }
  const body = JSON.stringify({ message: "request_header_too_large", data: {} });
  socket.end(
    `${head}Content-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
