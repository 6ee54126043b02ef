import { Code, ConnectError } from "@connectrpc/connect";
import { errorInfoOf } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { dataOf } from "./wire.js";

function problemOf(json: string, key: string): unknown {
  try {
    dataOf(json, key);
  } catch (error) {
    if (!(error instanceof ConnectError)) throw error;
    const info = errorInfoOf(error);
    return { code: error.code, reason: info?.reason, extra: info?.metadata.extra };
  }
  return "no error";
}

describe("dataOf", () => {
  it("reads the JSON object of a write, and nothing for empty text", () => {
    expect(dataOf('{"Name":"Ada","Tags":["a"],"At":null}', "data")).toEqual({
      Name: "Ada",
      Tags: ["a"],
      At: null,
    });
    expect(dataOf("", "data")).toBeUndefined();
  });

  it("answers 400 on the key for anything but a JSON object", () => {
    for (const json of ["[1]", "null", "3", '"x"', "{", "{'a':1}"]) {
      expect(problemOf(json, "records.2.data"), json).toEqual({
        code: Code.InvalidArgument,
        reason: "validation_failed",
        extra: JSON.stringify([
          {
            key: "records.2.data",
            message: "must be a JSON object",
            source: "body",
            code: "invalid_type",
          },
        ]),
      });
    }
  });
});
