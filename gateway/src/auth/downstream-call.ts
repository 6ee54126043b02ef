import type { CallOptions } from "@connectrpc/connect";
import {
  injectTraceContext,
  LocalCache,
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
  if (caller) headers[PRINCIPAL_HEADER] = await signedPrincipal(internalSecret, caller);
  return { headers, timeoutMs: RPC_TIMEOUT_MS };
}

/**
 * How long a signed principal is reused for the same caller: a signature lives 60 s, so a
 * reused one still has 40 s, far more than a call may take (RPC_TIMEOUT_MS). The caller was
 * authenticated for this request already; reuse only spares signing it again.
 */
export const SIGNED_PRINCIPAL_REUSE_MS = 20_000;

const signed = new LocalCache<string>(SIGNED_PRINCIPAL_REUSE_MS);

async function signedPrincipal(internalSecret: string, caller: Principal): Promise<string> {
  // The secret is part of the key: tests run gateways with different secrets in one process.
  const key = `${internalSecret}\n${JSON.stringify(caller, (_, value) =>
    typeof value === "bigint" ? value.toString() : value,
  )}`;
  const known = signed.get(key);
  if (known) return known;
  const token = await signPrincipal(internalSecret, caller);
  signed.set(key, token);
  return token;
}
