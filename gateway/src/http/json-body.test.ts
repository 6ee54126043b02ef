import { describe, expect, it } from "vitest";
import { ValidationFailed } from "../errors/validation-failed.js";
import {
  JSON_BODY_LIMIT_BYTES,
  JsonBodyBudget,
  parseJsonBody,
  type ReceivedBody,
  SMALL_JSON_BODY_BYTES,
} from "./json-body.js";

/** A received body of `bytes` bytes. */
const body = (bytes: number): ReceivedBody => ({ text: "x".repeat(bytes) });

/** Work that runs until `finish` is called, recording that it started. */
function held() {
  let finish = () => {};
  const work = {
    started: false,
    finish: () => finish(),
    run: () => {
      work.started = true;
      return new Promise<void>((resolve) => {
        finish = resolve;
      });
    },
  };
  return work;
}

/** The same budget for small and large bodies. */
const both = (bytes: number) => ({ small: bytes, large: bytes });

/** Lets every promise the budget could resolve run (the semaphore hands out shares in microtasks). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("JsonBodyBudget", () => {
  it("runs bodies that fit together, and holds one back until an earlier one is answered", async () => {
    const budget = new JsonBodyBudget(both(10 * 1024));
    const first = held();
    const second = held();
    const third = held();
    const firstDone = budget.run(body(4 * 1024), first.run);
    // 5 KiB and a byte: a started KiB counts whole.
    const secondDone = budget.run(body(5 * 1024 + 1), second.run);
    const thirdDone = budget.run(body(1), third.run);
    await settle();
    expect([first.started, second.started, third.started]).toEqual([true, true, false]);

    first.finish();
    await firstDone;
    await settle();
    expect(third.started).toBe(true);
    second.finish();
    third.finish();
    await Promise.all([secondDone, thirdDone]);
  });

  it("counts a body by its UTF-8 bytes", async () => {
    const budget = new JsonBodyBudget(both(4 * 1024));
    const wide = held();
    const small = held();
    // 700 three-byte characters: 2100 bytes, three KiB units, so two more do not fit.
    const wideDone = budget.run({ text: "€".repeat(700) }, wide.run);
    const smallDone = budget.run(body(2 * 1024), small.run);
    await settle();
    expect([wide.started, small.started]).toEqual([true, false]);
    wide.finish();
    await wideDone;
    await settle();
    expect(small.started).toBe(true);
    small.finish();
    await smallDone;
  });

  it("never holds back a request without a body, or one whose body cannot be read", async () => {
    const budget = new JsonBodyBudget(both(1024));
    const full = held();
    const fullDone = budget.run(body(1024), full.run);
    await expect(budget.run(undefined, async () => "answered")).resolves.toBe("answered");
    await expect(budget.run(body(0), async () => "too")).resolves.toBe("too");
    const problem = {
      problem: ValidationFailed.of("header", "content-type", "must be json", "invalid_value"),
    };
    await expect(budget.run(problem, async () => "reported")).resolves.toBe("reported");
    full.finish();
    await fullDone;
  });

  it("counts a body at most as the limit", async () => {
    const budget = new JsonBodyBudget(both(JSON_BODY_LIMIT_BYTES));
    // Bytes that are not UTF-8 decode to three-byte replacement characters.
    await expect(
      budget.run({ text: "\ufffd".repeat(JSON_BODY_LIMIT_BYTES) }, async () => "ran"),
    ).resolves.toBe("ran");
  });

  it("never holds a small body back behind large ones, nor a large one behind small ones", async () => {
    const budget = new JsonBodyBudget({ small: 64 * 1024, large: 512 * 1024 });
    const large = held();
    const waiting = held();
    const small = held();
    const largeDone = budget.run(body(512 * 1024), large.run);
    // The large budget is full: the next large body waits, a small one goes ahead of it.
    const waitingDone = budget.run(body(SMALL_JSON_BODY_BYTES + 1), waiting.run);
    const smallDone = budget.run(body(SMALL_JSON_BODY_BYTES), small.run);
    await settle();
    expect([large.started, waiting.started, small.started]).toEqual([true, false, true]);
    small.finish();
    await smallDone;
    large.finish();
    await largeDone;
    await settle();
    expect(waiting.started).toBe(true);
    waiting.finish();
    await waitingDone;
  });

  it("gives the share back when the work fails", async () => {
    const budget = new JsonBodyBudget(both(1024));
    await expect(
      budget.run(body(1024), async () => {
        throw new Error("refused");
      }),
    ).rejects.toThrow("refused");
    await expect(budget.run(body(100), async () => "next")).resolves.toBe("next");
  });
});

describe("parseJsonBody", () => {
  const problemOf = (text: string) => {
    try {
      parseJsonBody({ text });
    } catch (error) {
      return error instanceof ValidationFailed ? error.items : error;
    }
    return "parsed";
  };

  it("parses objects and arrays, an empty body as {}, and no body as undefined", () => {
    expect(parseJsonBody({ text: ' \n{"a": [1, {"b": null}]}' })).toEqual({ a: [1, { b: null }] });
    expect(parseJsonBody({ text: "[1]" })).toEqual([1]);
    expect(parseJsonBody({ text: "" })).toEqual({});
    expect(parseJsonBody(undefined)).toBeUndefined();
  });

  it.each([
    ["malformed JSON", '{"a": '],
    ["a top-level string", '"text"'],
    ["a top-level number", "12"],
  ])("refuses %s as the 400 body item", (_, text) => {
    expect(problemOf(text)).toEqual([
      { key: "body", message: "is not valid JSON", source: "body", code: "invalid_syntax" },
    ]);
  });

  it("refuses a __proto__ key anywhere, saying so", () => {
    expect(problemOf('{"data": {"__proto__": {"admin": true}}}')).toEqual([
      {
        key: "body",
        message: 'must not hold a "__proto__" key',
        source: "body",
        code: "invalid_value",
      },
    ]);
  });

  it("reports a problem found while receiving as it was found", () => {
    const problem = ValidationFailed.of(
      "header",
      "content-type",
      "must be application/json",
      "invalid_value",
    );
    expect(() => parseJsonBody({ problem })).toThrow(problem);
  });
});
