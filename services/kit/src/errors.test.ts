import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  errorInfoOf,
  trimmedOrRefused,
  VALIDATION_REASON,
  type ValidationItem,
  validationFailed,
} from "./errors.js";

describe("validationFailed", () => {
  it("is InvalidArgument with the validation reason and the items as JSON in `extra`", () => {
    const items: ValidationItem[] = [
      { key: "name", message: "must be 1-100 characters", source: "body", code: "too_long" },
      { key: "limit", message: "must be 1-100", source: "query", code: "out_of_range" },
    ];
    const error = validationFailed(items);
    expect(error.code).toBe(Code.InvalidArgument);
    const info = errorInfoOf(error);
    expect(info?.reason).toBe(VALIDATION_REASON);
    expect(JSON.parse(info?.metadata.extra ?? "")).toEqual(items);
  });

  it("carries more items than a spread call could pass", () => {
    const items = Array.from(
      { length: 200_000 },
      (_, i): ValidationItem => ({
        key: `records.${i}.data`,
        message: "must be a JSON object",
        source: "body",
        code: "invalid_type",
      }),
    );
    const extra = errorInfoOf(validationFailed(items))?.metadata.extra ?? "[]";
    expect(JSON.parse(extra)).toHaveLength(200_000);
  });
});

describe("trimmedOrRefused", () => {
  const noDigits = (value: string) => (/[0-9]/.test(value) ? "must hold no digits" : undefined);

  it("answers the text trimmed when the rule takes it", () => {
    expect(trimmedOrRefused("  Projects \n", "name", noDigits)).toBe("Projects");
  });

  it("checks the trimmed text and refuses it keyed `key`, from the body", () => {
    const seen: string[] = [];
    const error = (() => {
      try {
        trimmedOrRefused(" a1 ", "fields.2.name", (value) => {
          seen.push(value);
          return noDigits(value);
        });
      } catch (thrown) {
        return thrown;
      }
    })();
    expect(seen).toEqual(["a1"]);
    const info = errorInfoOf(error);
    expect(info?.reason).toBe(VALIDATION_REASON);
    expect(JSON.parse(info?.metadata.extra ?? "")).toEqual([
      {
        key: "fields.2.name",
        message: "must hold no digits",
        source: "body",
        code: "invalid_value",
      },
    ]);
  });
});
