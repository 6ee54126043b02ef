import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type ErrorInfo, ErrorInfoSchema } from "@rowbase/proto/google/rpc/error_details_pb";

export { Code, ConnectError };

/** The ErrorInfo domain of every Rowbase error. */
export const ERROR_DOMAIN = "rowbase";

/**
 * A domain failure: a canonical gRPC code plus the contract's error code (`database_not_found`)
 * as the ErrorInfo reason, which the gateway turns into an HTTP status and envelope.
 */
export function domainError(
  code: Code,
  reason: string,
  metadata: Record<string, string> = {},
): ConnectError {
  const info = create(ErrorInfoSchema, { reason, domain: ERROR_DOMAIN, metadata });
  return new ConnectError(reason, code, undefined, [{ desc: ErrorInfoSchema, value: info }]);
}

/** The ErrorInfo carried by an error, if it is a Rowbase domain error. */
export function errorInfoOf(error: unknown): ErrorInfo | undefined {
  if (!(error instanceof ConnectError)) return undefined;
  return error.findDetails(ErrorInfoSchema).find((info) => info.domain === ERROR_DOMAIN);
}
