import type { IncomingMessage } from "node:http";
import ipaddr from "ipaddr.js";
import proxyaddr from "proxy-addr";

/**
 * The key of the client for the per-IP rate limits: its address, the socket peer or the one
 * X-Forwarded-For names when every hop between is a configured trusted proxy (proxy-addr walks
 * the chain from the socket). Koa's own `app.proxy` trusts the header from anyone, which would
 * let a client pick its key. An IPv6 client counts by its /64 network: one subscriber usually
 * holds a whole /64 and could otherwise take a fresh key for every request.
 */
export function clientIpResolver(trustedProxies: string[]): (req: IncomingMessage) => string {
  const trust = proxyaddr.compile(trustedProxies);
  return (req) => rateLimitKeyOf(proxyaddr(req, trust) ?? "unknown");
}

/** An IPv4 address as it is (also when a dual-stack socket shows it as `::ffff:a.b.c.d`); an IPv6 one as its /64. */
function rateLimitKeyOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === "ipv4") return parsed.toString();
  const network = (parsed as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16));
  return `${network.join(":")}::/64`;
}
