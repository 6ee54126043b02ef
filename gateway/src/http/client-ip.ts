import type { IncomingMessage } from "node:http";
import proxyaddr from "proxy-addr";

/**
 * The client's IP for rate limits: the socket peer, or the address X-Forwarded-For names when
 * every hop between is a configured trusted proxy (proxy-addr walks the chain from the socket).
 * Koa's own `app.proxy` trusts the header from anyone, which would let a client pick its key.
 */
export function clientIpResolver(trustedProxies: string[]): (req: IncomingMessage) => string {
  const trust = proxyaddr.compile(trustedProxies);
  return (req) => normalize(proxyaddr(req, trust) ?? "unknown");
}

/** An IPv4 peer on a dual-stack socket shows up as `::ffff:a.b.c.d`; count it once. */
function normalize(address: string): string {
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}
