import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import { ERROR_STATUS, type ErrorCode } from "../errors/error-table.js";

/** What Node's HTTP parser reports, with the code that says which refusal it was. */
type ParserError = Error & { code?: string };

/** The status lines of the answers written here. */
const REASONS: Record<number, string> = {
  400: "Bad Request",
  405: "Method Not Allowed",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
};

/** The envelope code of a parser refusal. */
function codeOf(code: string | undefined): ErrorCode {
  // Headers that took longer than REQUEST_HEADERS_TIMEOUT_MS (Node's headersTimeout).
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") return "request_timeout";
  if (code === "HPE_HEADER_OVERFLOW") return "request_header_too_large";
  // A method Node's parser does not know (FOO, or get in lower case): no route takes it.
  if (code === "HPE_INVALID_METHOD") return "method_not_allowed";
  return "malformed_request";
}

/**
 * Writes an error answer on a socket no request reached the app on, and closes it: the error
 * envelope with a new `X-Request-Id` (the request's own could not be read) and
 * the headers every gateway answer has.
 */
export function answerOnSocket(socket: Duplex, status: number, code: ErrorCode): void {
  const head =
    `HTTP/1.1 ${status} ${REASONS[status]}\r\nConnection: close\r\n` +
    `X-Request-Id: ${randomUUID()}\r\n`;
  const body = JSON.stringify({ message: code, data: {} });
  socket.end(
    `${head}Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n` +
      `Content-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/**
 * Answers what Node's HTTP parser refuses before the app sees a request (the server's
 * `clientError`), in the error envelope instead of Node's bare status line: a request line and
 * headers past Node's limit (16 KiB, a long `where` in a URL, say) are 431
 * `request_header_too_large`; a method the parser does not know (which is also how most bytes
 * that are not HTTP begin) is 405 `method_not_allowed`, without `Allow`: the parser stops before
 * the path, so there is no route to name the methods of; anything else it refuses (a malformed
 * request line, bad characters in a header, a bad or doubled `Content-Length` or one beside
 * `Transfer-Encoding`) is 400 `malformed_request`; headers that did not arrive in time are 408
 * `request_timeout`. A socket that is already gone, or that is in the middle of an answer, is
 * only closed.
 */
export function answerClientError(error: ParserError, socket: Duplex): void {
  const busy = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (error.code === "ECONNRESET" || !socket.writable || busy?.headersSent) {
    socket.destroy();
    return;
  }
  const code = codeOf(error.code);
  answerOnSocket(socket, ERROR_STATUS[code], code);
}

/**
 * Answers a CONNECT request (the server's `connect`), which Node hands over as a raw socket
 * and, without a listener, closes with no answer at all: the gateway is no proxy and has no
 * route for it, so it is 405 `method_not_allowed` in the envelope like any other method no
 * route takes. The socket is no longer Node's to watch, so its errors are handled here.
 */
export function answerConnect(_request: unknown, socket: Duplex): void {
  socket.on("error", () => socket.destroy());
  answerOnSocket(socket, ERROR_STATUS.method_not_allowed, "method_not_allowed");
}
