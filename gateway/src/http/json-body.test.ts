import type { Context } from "koa";
import { describe, expect, it } from "vitest";
import { JSON_BODY_LIMIT_BYTES, JsonBodyBudget } from "./json-body.js";

function request(headers: { "content-length"?: number; "transfer-encoding"?: string }): Context {
  const length = headers["content-length"];
  return {
    request: { length },
    get: (name: string) => (name === "transfer-encoding" ? (headers[name] ?? "") : ""),
  } as unknown as Context;
}

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

/** Lets every promise the budget could resolve run (the semaphore hands out shares in microtasks). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("JsonBodyBudget", () => {
  it("runs bodies that fit together, and holds one back until an earlier one is answered", async () => {
    const budget = new JsonBodyBudget(10 * 1024);
    const first = held();
    const second = held();
    const third = held();
    const firstDone = budget.run(request({ "content-length": 4 * 1024 }), first.run);
    // 5 KiB and a byte: a started KiB counts whole.
    const secondDone = budget.run(request({ "content-length": 5 * 1024 + 1 }), second.run);
    const thirdDone = budget.run(request({ "content-length": 1 }), third.run);
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

  it("counts a chunked body as the whole limit, a larger declared one as the limit too", async () => {
    const budget = new JsonBodyBudget(JSON_BODY_LIMIT_BYTES);
    const chunked = held();
    const declared = held();
    const chunkedDone = budget.run(request({ "transfer-encoding": "chunked" }), chunked.run);
    const declaredDone = budget.run(
      request({ "content-length": JSON_BODY_LIMIT_BYTES * 5 }),
      declared.run,
    );
    await settle();
    expect([chunked.started, declared.started]).toEqual([true, false]);
    chunked.finish();
    await chunkedDone;
    await settle();
    expect(declared.started).toBe(true);
    declared.finish();
    await declaredDone;
  });

  it("never holds back a request without a body", async () => {
    const budget = new JsonBodyBudget(1024);
    const full = held();
    const fullDone = budget.run(request({ "content-length": 1024 }), full.run);
    await expect(budget.run(request({}), async () => "answered")).resolves.toBe("answered");
    await expect(budget.run(request({ "content-length": 0 }), async () => "too")).resolves.toBe(
      "too",
    );
    full.finish();
    await fullDone;
  });

  it("gives the share back when the work fails", async () => {
    const budget = new JsonBodyBudget(1024);
    await expect(
      budget.run(request({ "content-length": 1024 }), async () => {
        throw new Error("refused");
      }),
    ).rejects.toThrow("refused");
    await expect(budget.run(request({ "content-length": 100 }), async () => "next")).resolves.toBe(
      "next",
    );
  });
});
