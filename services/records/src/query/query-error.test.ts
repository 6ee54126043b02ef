import { describe, expect, it } from "vitest";
import { QueryError, quoteForMessage } from "./query-error.js";

describe("QueryError", () => {
  it("puts the position in the message and the validation issue", () => {
    const error = new QueryError("where", "unknown operator 'eqq'", 9);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe("QueryError");
    expect(error.message).toBe("unknown operator 'eqq' at 9");
    expect(error.reason).toBe("unknown operator 'eqq'");
    expect(error.position).toBe(9);
    expect(error.toValidationIssue()).toEqual({
      key: "where",
      message: "unknown operator 'eqq' at 9",
      source: "query",
      code: "invalid_syntax",
    });
  });

  it("leaves the position out when no single place is at fault", () => {
    const error = new QueryError("sort", "must name at least one field");
    expect(error.message).toBe("must name at least one field");
    expect(error.position).toBeUndefined();
  });
});

describe("quoteForMessage", () => {
  it("quotes and cuts long text by characters", () => {
    expect(quoteForMessage("eqq")).toBe("'eqq'");
    expect(quoteForMessage("😀".repeat(61))).toBe(`'${"😀".repeat(60)}...'`);
  });
});
