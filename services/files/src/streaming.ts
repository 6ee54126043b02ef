import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { errorInfoOf, type Logger, REQUEST_ID_HEADER } from "@rowbase/kit";

/**
 * Kit's call interceptor sees a server-streaming call end when its handler returns the stream,
 * before a single message is produced; whatever fails while the stream runs (the authorization
 * in the handler's first step, a storage backend dropping the connection) would reach the client
 * with its raw message. This one follows the stream: domain errors pass, anything else is logged
 * with its cause and becomes a masked Internal, as for unary calls.
 */
export function streamingErrorsInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const res = await next(req);
    if (!res.stream) return res;
    const procedure = `${req.service.typeName}/${req.method.name}`;
    const requestId = req.header.get(REQUEST_ID_HEADER) ?? undefined;
    return { ...res, message: guarded(res.message, logger, procedure, requestId) };
  };
}

async function* guarded<T>(
  messages: AsyncIterable<T>,
  logger: Logger,
  procedure: string,
  requestId: string | undefined,
): AsyncGenerator<T> {
  try {
    yield* messages;
  } catch (error) {
    if (error instanceof ConnectError && (errorInfoOf(error) || error.code !== Code.Internal)) {
      logger.info(
        {
          procedure,
          status: Code[error.code],
          reason: errorInfoOf(error)?.reason,
          request_id: requestId,
        },
        "stream ended",
      );
      throw error;
    }
    logger.error({ procedure, err: error, request_id: requestId }, "stream failed");
    throw new ConnectError("internal error", Code.Internal, undefined, undefined, error);
  }
}
