import ipaddr from "ipaddr.js";

/**
 * Which addresses a webhook may reach. Only public unicast addresses are reachable by default:
 * loopback, private (RFC 1918), link-local (the cloud metadata address 169.254.169.254
 * included), CGNAT, multicast, broadcast, unspecified and reserved IPv4; and IPv6 loopback,
 * unique-local, link-local, multicast, unspecified and the forms that carry an IPv4 address
 * (mapped, NAT64, 6to4, Teredo) are refused, an IPv4-mapped address being judged as the IPv4
 * address it carries. The address classes come from ipaddr.js, not from our own parsing.
 */

/** The class of an address: `unicast` for a public one, else ipaddr.js's range name. */
export function addressClass(address: string): string {
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range();
}

/** Whether an address (a literal IPv4 or IPv6 address) is a public unicast one. */
export function isPublicAddress(address: string): boolean {
  return ipaddr.isValid(address) && addressClass(address) === "unicast";
}

/** One entry of WEBHOOK_ALLOWED_TARGETS. */
type AllowedTarget =
  | { kind: "range"; range: [ipaddr.IPv4 | ipaddr.IPv6, number] }
  | { kind: "host"; host: string; port: number | undefined };

/** Where a connection is about to go: the URL's host and port, and the address it resolved to. */
export interface ConnectTarget {
  hostname: string;
  port: number;
  address: string;
}

/**
 * WEBHOOK_ALLOWED_TARGETS: targets webhooks may reach although their address is not public
 * (loopback receivers in tests, a partner on a private network). Comma-separated hosts, IP
 * addresses, `host:port`s (`[v6]:port` for an IPv6 address) and CIDR ranges.
 */
export class AllowedTargets {
  private constructor(private readonly entries: readonly AllowedTarget[]) {}

  static none(): AllowedTargets {
    return new AllowedTargets([]);
  }

  /** Parses the setting; throws with the entry that does not parse. */
  static parse(text: string): AllowedTargets {
    const entries = text
      .split(",")
      .map((entry) => entry.trim())
      .filter((entry) => entry !== "")
      .map(parseEntry);
    return new AllowedTargets(entries);
  }

  /** Whether the connection may be made: a public address, or one the setting lists. */
  permits(target: ConnectTarget): boolean {
    return isPublicAddress(target.address) || this.lists(target);
  }

  private lists({ hostname, port, address }: ConnectTarget): boolean {
    const host = unbracket(hostname).toLowerCase();
    const parsed = ipaddr.isValid(address) ? ipaddr.process(address) : undefined;
    return this.entries.some((entry) => {
      if (entry.kind === "range") {
        return parsed !== undefined && parsed.kind() === entry.range[0].kind()
          ? parsed.match(entry.range)
          : false;
      }
      if (entry.port !== undefined && entry.port !== port) return false;
      if (ipaddr.isValid(entry.host)) {
        return parsed !== undefined && ipaddr.process(entry.host).toString() === parsed.toString();
      }
      return entry.host === host;
    });
  }
}

function unbracket(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function parseEntry(entry: string): AllowedTarget {
  if (entry.includes("/")) {
    try {
      const range = ipaddr.parseCIDR(entry);
      return { kind: "range", range: [ipaddr.process(range[0].toString()), range[1]] };
    } catch {
      throw new Error(`WEBHOOK_ALLOWED_TARGETS: ${entry} is not a CIDR range`);
    }
  }
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(entry);
  if (bracketed) return hostEntry(entry, bracketed[1]!, bracketed[2]);
  if (ipaddr.isValid(entry)) return { kind: "host", host: entry, port: undefined };
  const withPort = /^([^:]+):(\d{1,5})$/.exec(entry);
  if (withPort) return hostEntry(entry, withPort[1]!, withPort[2]);
  if (/^[A-Za-z0-9.-]+$/.test(entry)) {
    return { kind: "host", host: entry.toLowerCase(), port: undefined };
  }
  throw new Error(`WEBHOOK_ALLOWED_TARGETS: ${entry} is not a host, host:port or CIDR range`);
}

function hostEntry(entry: string, host: string, port: string | undefined): AllowedTarget {
  const number = port === undefined ? undefined : Number(port);
  if (number !== undefined && (number < 1 || number > 65535)) {
    throw new Error(`WEBHOOK_ALLOWED_TARGETS: ${entry} has no valid port`);
  }
  if (!ipaddr.isValid(host) && !/^[A-Za-z0-9.-]+$/.test(host)) {
    throw new Error(`WEBHOOK_ALLOWED_TARGETS: ${entry} is not a host`);
  }
  return { kind: "host", host: host.toLowerCase(), port: number };
}
