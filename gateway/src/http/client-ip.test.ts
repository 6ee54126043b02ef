import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { clientIpResolver } from "./client-ip.js";

function request(peer: string, forwardedFor?: string): IncomingMessage {
  return {
    socket: { remoteAddress: peer },
    headers: forwardedFor ? { "x-forwarded-for": forwardedFor } : {},
  } as unknown as IncomingMessage;
}

describe("client IP", () => {
  it("is the socket peer when no proxy is trusted, whatever X-Forwarded-For says", () => {
    const ipOf = clientIpResolver([]);
    expect(ipOf(request("203.0.113.9", "198.51.100.1"))).toBe("203.0.113.9");
  });

  it("follows X-Forwarded-For only through trusted hops", () => {
    const ipOf = clientIpResolver(["10.0.0.0/8"]);
    expect(ipOf(request("10.1.2.3", "198.51.100.1"))).toBe("198.51.100.1");
    // A client-supplied first entry behind one trusted proxy does not win.
    expect(ipOf(request("10.1.2.3", "1.1.1.1, 198.51.100.1"))).toBe("198.51.100.1");
    // The peer itself is not trusted: the header is ignored.
    expect(ipOf(request("203.0.113.9", "198.51.100.1"))).toBe("203.0.113.9");
  });

  it("counts an IPv4 peer on a dual-stack socket as the IPv4 address", () => {
    expect(clientIpResolver([])(request("::ffff:127.0.0.1"))).toBe("127.0.0.1");
  });

  it("counts an IPv6 client by its /64, however it writes its address", () => {
    const ipOf = clientIpResolver([]);
    const key = "2001:db8:1:2::/64";
    for (const peer of [
      "2001:db8:1:2::1",
      "2001:db8:1:2:ffff:0:0:9",
      "2001:0DB8:0001:0002::abcd",
    ]) {
      expect(ipOf(request(peer))).toBe(key);
    }
    expect(ipOf(request("2001:db8:1:3::1"))).toBe("2001:db8:1:3::/64");
    expect(ipOf(request("::1"))).toBe("0:0:0:0::/64");
  });
});
