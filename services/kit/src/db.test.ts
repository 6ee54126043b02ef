import pg from "pg";
import { describe, expect, it } from "vitest";
import { clientWithConnectTimeout } from "./db.js";

describe("clientWithConnectTimeout", () => {
  it("keeps the pool's hidden password and adds the connect timeout", () => {
    // pg-pool hands its clients its options with the password as a non-enumerable property.
    const poolOptions = Object.defineProperty({ host: "127.0.0.1", user: "rowbase" }, "password", {
      value: "secret",
      enumerable: false,
      writable: true,
      configurable: true,
    });
    const Client = clientWithConnectTimeout(1234);
    const client = new Client(poolOptions) as pg.Client & { _connectionTimeoutMillis: number };
    expect(client).toBeInstanceOf(pg.Client);
    expect(client.password).toBe("secret");
    expect(client._connectionTimeoutMillis).toBe(1234);
    expect(Object.keys(poolOptions)).not.toContain("connectionTimeoutMillis");
  });
});
