import { describe, expect, it } from "vitest";
import { isTransientConflict, isUnreachableDependency } from "./unreachable.js";

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe("isUnreachableDependency", () => {
  it("knows PostgreSQL going away, starting up or refusing, and Redis away", () => {
    for (const error of [
      withCode("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED"),
      withCode("terminating connection due to administrator command", "57P01"),
      withCode("the database system is starting up", "57P03"),
      withCode("connection failure", "08006"),
      new Error("Connection terminated unexpectedly"),
      new Error("timeout exceeded when trying to connect"),
      new Error("timeout expired"),
      new Error("Redis unavailable (reconnecting)"),
      Object.assign(new Error("wrapped"), { name: "ConnectionException" }),
      new Error("query failed", { cause: withCode("read ECONNRESET", "ECONNRESET") }),
      new AggregateError([withCode("connect ECONNREFUSED ::1:5432", "ECONNREFUSED")]),
    ]) {
      expect(isUnreachableDependency(error), error.message).toBe(true);
    }
  });

  it("leaves faults of the request or the code alone", () => {
    for (const error of [
      withCode('duplicate key value violates unique constraint "x"', "23505"),
      withCode('relation "nope" does not exist', "42P01"),
      new TypeError("Cannot read properties of undefined"),
      "a string",
      undefined,
    ]) {
      expect(isUnreachableDependency(error)).toBe(false);
    }
  });
});

describe("isTransientConflict", () => {
  it("knows a deadlock and a serialization failure, wrapped or not, and nothing else", () => {
    expect(isTransientConflict(withCode("deadlock detected", "40P01"))).toBe(true);
    expect(
      isTransientConflict(
        new Error("wrapped", { cause: withCode("could not serialize", "40001") }),
      ),
    ).toBe(true);
    expect(isTransientConflict(withCode("duplicate key", "23505"))).toBe(false);
    expect(isTransientConflict(withCode("connect ECONNREFUSED", "ECONNREFUSED"))).toBe(false);
  });
});
