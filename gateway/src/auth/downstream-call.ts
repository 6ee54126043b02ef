import type { CallOptions } from "@connectrpc/connect";
import {
  injectTraceContext,
  PRINCIPAL_HEADER,
  type Principal,
  REQUEST_ID_HEADER,
  signPrincipal,
} from "@rowbase/kit";

/**
 * How long the gateway waits for a service; past it the call fails DeadlineExceeded, which the
 * error table answers 503 rather than holding the client's connection.
 */
export const RPC_TIMEOUT_MS = 10_000;

/**
 * The options of every gRPC call made for one request: its request id, its trace (W3C
 * `traceparent` of the request's span), and the authenticated caller as kit's signed principal
 * (services verify it and never trust a bare header).
 */
export async function downstreamCallOptions(
  internalSecret: string,
  requestId: string,
  caller: Principal | undefined,
): Promise<CallOptions> {
  const headers: Record<string, string> = { [REQUEST_ID_HEADER]: requestId };
  injectTraceContext(headers);
  if (caller) headers[PRINCIPAL_HEADER] = await signPrincipal(internalSecret, caller);
  return { headers, timeoutMs: RPC_TIMEOUT_MS };
}
