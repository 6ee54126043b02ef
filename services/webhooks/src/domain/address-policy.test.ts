import { describe, expect, it } from "vitest";
import { AllowedTargets, addressClass, isPublicAddress } from "./address-policy.js";

describe("the webhook address policy", () => {
  it("refuses every address that is not public unicast", () => {
    for (const address of [
      "127.0.0.1",
      "127.255.255.254",
      "10.0.0.1",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.1.1",
      "169.254.169.254",
      "169.254.0.1",
      "100.64.0.1",
      "100.127.255.255",
      "224.0.0.1",
      "239.255.255.250",
      "0.0.0.0",
      "255.255.255.255",
      "240.0.0.1",
      "::1",
      "::",
      "fc00::1",
      "fd12:3456::1",
      "fe80::1",
      "ff02::1",
      "::ffff:127.0.0.1",
      "::ffff:10.0.0.1",
      "::ffff:169.254.169.254",
      "64:ff9b::7f00:1",
    ]) {
      expect(isPublicAddress(address), address).toBe(false);
    }
  });

  it("lets public unicast addresses through, an IPv4-mapped one judged as its IPv4 address", () => {
    for (const address of [
      "8.8.8.8",
      "1.1.1.1",
      "172.32.0.1",
      "100.128.0.1",
      "2001:4860:4860::8888",
      "::ffff:8.8.8.8",
    ]) {
      expect(isPublicAddress(address), address).toBe(true);
    }
    expect(addressClass("::ffff:192.168.0.1")).toBe("private");
  });

  it("refuses what is not an address at all", () => {
    expect(isPublicAddress("example.com")).toBe(false);
    expect(isPublicAddress("")).toBe(false);
  });

  it("lets the targets of WEBHOOK_ALLOWED_TARGETS through: hosts, host:port, addresses, CIDRs", () => {
    const allowed = AllowedTargets.parse(
      "localhost:8443, 127.0.0.1, 10.1.0.0/16, [::1]:9000, partner.internal",
    );
    const at = (hostname: string, port: number, address: string) =>
      allowed.permits({ hostname, port, address });
    expect(at("localhost", 8443, "127.0.0.1")).toBe(true);
    expect(at("localhost", 8444, "::1")).toBe(false);
    expect(at("anything", 80, "127.0.0.1")).toBe(true);
    expect(at("127.0.0.1", 1234, "127.0.0.1")).toBe(true);
    expect(at("x", 80, "127.0.0.2")).toBe(false);
    expect(at("x", 80, "10.1.200.3")).toBe(true);
    expect(at("x", 80, "10.2.0.1")).toBe(false);
    expect(at("[::1]", 9000, "::1")).toBe(true);
    expect(at("[::1]", 9001, "::1")).toBe(false);
    expect(at("partner.internal", 443, "192.168.5.5")).toBe(true);
    expect(at("PARTNER.internal", 443, "192.168.5.5")).toBe(true);
    // A mapped loopback address is the address the setting names.
    expect(at("x", 80, "::ffff:127.0.0.1")).toBe(true);
    expect(AllowedTargets.none().permits({ hostname: "x", port: 80, address: "127.0.0.1" })).toBe(
      false,
    );
    expect(AllowedTargets.none().permits({ hostname: "x", port: 80, address: "8.8.8.8" })).toBe(
      true,
    );
  });

  it("refuses a setting that does not parse, naming the entry", () => {
    for (const text of ["10.0.0.0/33", "host:99999", "a b", "http://x"]) {
      expect(() => AllowedTargets.parse(text), text).toThrow(/WEBHOOK_ALLOWED_TARGETS/);
    }
    expect(() => AllowedTargets.parse("")).not.toThrow();
  });
});
