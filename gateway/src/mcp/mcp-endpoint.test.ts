import { describe, expect, it } from "vitest";
import { allowedHosts } from "./mcp-endpoint.js";

describe("the Host values /mcp answers", () => {
  it("is PUBLIC_BASE_URL's host, with its port", () => {
    expect(allowedHosts("https://api.example.com")).toEqual(["api.example.com"]);
    expect(allowedHosts("https://api.example.com:8443")).toEqual(["api.example.com:8443"]);
  });

  it("takes any loopback spelling of a loopback base", () => {
    expect(allowedHosts("http://localhost:8080")).toEqual([
      "localhost:8080",
      "127.0.0.1:8080",
      "[::1]:8080",
    ]);
    expect(allowedHosts("http://127.0.0.1")).toEqual(["localhost", "127.0.0.1", "[::1]"]);
  });

  it("adds the operator's hosts", () => {
    expect(allowedHosts("https://api.example.com", ["rowbase-gateway:8080"])).toEqual([
      "api.example.com",
      "rowbase-gateway:8080",
    ]);
  });
});
