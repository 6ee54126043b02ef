import { ConnectError, type Interceptor } from "@connectrpc/connect";

/** How often a refused unary call is sent again before its error stands. */
const REFUSED_RETRIES = 2;

/**
 * Sends a unary call again when the server refused its stream (HTTP/2 REFUSED_STREAM): the
 * server guarantees it did not process it, so a retry is safe for any method. It happens when a
 * call crosses a server's GOAWAY on the wire, which every connection sees when it reaches its
 * maximum age and every replica at shutdown; without the retry each would cost a caller a 503.
 * Streaming calls are not retried (their input cannot be replayed).
 */
export const refusedStreamRetryInterceptor: Interceptor = (next) => async (req) => {
  if (req.stream) return next(req);
  for (let attempt = 0; ; attempt++) {
    try {
      return await next(req);
    } catch (error) {
      if (!isRefusedStream(error) || attempt >= REFUSED_RETRIES || req.signal.aborted) throw error;
    }
  }
};

/**
 * Whether a call's stream was refused (HTTP/2 REFUSED_STREAM). A server never passes one of its
 * own calls' refusals on as such (callContextInterceptor), so a caller sees only its own.
 */
export function isRefusedStream(error: unknown): boolean {
  return error instanceof ConnectError && error.rawMessage.includes("REFUSED_STREAM");
}
