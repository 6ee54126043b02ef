import { createLogger, type Orm } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { ChangeSequencer, cursorText, parseCursor } from "./change-log.js";

describe("change cursors", () => {
  it("read back the table and position they were written from", () => {
    const cursor = { tableId: 12n, position: 9_007_199_254_740_991n };
    expect(parseCursor(cursorText(cursor))).toEqual(cursor);
    expect(parseCursor(cursorText({ tableId: 1n, position: 0n }))).toEqual({
      tableId: 1n,
      position: 0n,
    });
  });

  it("are refused when they are not ours", () => {
    for (const text of [
      "",
      "now",
      "nonsense",
      Buffer.from("12:-1").toString("base64url"),
      Buffer.from("0:5").toString("base64url"),
      Buffer.from("12:05").toString("base64url"),
      Buffer.from("12:5:6").toString("base64url"),
      "a".repeat(61),
      "MTI6NQ==",
    ]) {
      expect(parseCursor(text), text).toBeUndefined();
    }
  });
});

describe("the change sequencer", () => {
  /** Counts its rounds instead of running record_change_sequence. */
  class CountingSequencer extends ChangeSequencer {
    rounds = 0;
    override async round(): Promise<bigint> {
      this.rounds += 1;
      return 0n;
    }
  }
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it("makes one round of the kicks that come within its settling time, and one more for a later kick", async () => {
    const sequencer = new CountingSequencer(
      undefined as unknown as Orm,
      createLogger("records-test", "silent"),
      60_000,
      20,
    );
    sequencer.kick();
    sequencer.kick();
    sequencer.kick();
    expect(sequencer.rounds).toBe(0);
    await sleep(80);
    expect(sequencer.rounds).toBe(1);
    sequencer.kick();
    await sleep(80);
    expect(sequencer.rounds).toBe(2);
    sequencer.kick();
    await sequencer.stop();
    await sleep(40);
    expect(sequencer.rounds).toBe(2);
  });
});
