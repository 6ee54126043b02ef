import type { EntityManager } from "@mikro-orm/postgresql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allocateRowIds, RowIdBlock } from "../src/db/writes.js";
import { openRecordsDatabase } from "./database.js";

// Small creates take their row ids from a block the process took from the sequence; the ids
// stay unique, ascending within the process, and a block older than its age is let go.

let db: Awaited<ReturnType<typeof openRecordsDatabase>>;
const em = () => db.orm.em.fork();

beforeAll(async () => {
  db = await openRecordsDatabase();
});

afterAll(async () => {
  await db?.close();
});

/** The sequence's next id, without taking it from anyone but this test. */
async function sequenceNext(): Promise<bigint> {
  const [next] = await allocateRowIds(em(), 1);
  return next!;
}

/**
 * A block over the sequence that counts the statements it sends (its refills, and the ids of a
 * larger create); one sent on `broken` fails.
 */
function countedBlock(size: number, broken?: EntityManager) {
  const sent = { statements: 0 };
  const block = new RowIdBlock(
    (on: EntityManager, count: number) => {
      sent.statements += 1;
      return on === broken
        ? Promise.reject(new Error("connection lost"))
        : allocateRowIds(on, count);
    },
    { size, maxAgeMs: 60_000 },
  );
  return { block, sent };
}

describe("RowIdBlock", () => {
  it("hands out a block's ids in order, one statement per block, then takes the next", async () => {
    const { block, sent } = countedBlock(4);
    const first = await block.take(em(), 1);
    const more = await block.take(em(), 3);
    expect(sent.statements).toBe(1);
    expect([...first, ...more]).toEqual([0n, 1n, 2n, 3n].map((i) => first[0]! + i));

    // Spent: the next create takes a new block, above what the sequence gave meanwhile.
    const between = await sequenceNext();
    const [next] = await block.take(em(), 1);
    expect(sent.statements).toBe(2);
    expect(next).toBeGreaterThan(between);
  });

  it("lets a block go once it is older than its age", async () => {
    let now = 1_000;
    const block = new RowIdBlock(allocateRowIds, { size: 8, maxAgeMs: 250 }, () => now);
    const [a] = await block.take(em(), 1);
    now += 249;
    const [b] = await block.take(em(), 1);
    expect(b).toBe(a! + 1n);
    now += 1;
    const between = await sequenceNext();
    const [c] = await block.take(em(), 1);
    // Not a+2 from the old block: a new one, after the id the sequence gave meanwhile.
    expect(c).toBeGreaterThan(between);
  });

  it("leaves a create larger than it serves to the sequence, and gives later creates ids above it", async () => {
    const { block, sent } = countedBlock(64);
    const [small] = await block.take(em(), 1);
    const large = await block.take(em(), 9);
    expect(large).toHaveLength(9);
    expect(sent.statements).toBe(2);
    // The block's other 63 ids are not used for it: the large create's come after them, and a
    // later create's after those (the block's rest is let go).
    expect(large[0]).toBeGreaterThan(small! + 63n);
    const [later] = await block.take(em(), 1);
    expect(later).toBeGreaterThan(large[8]!);
    expect(sent.statements).toBe(3);
  });

  it("gives parallel creates distinct ids, sharing one refill", async () => {
    const { block, sent } = countedBlock(16);
    const ids = (await Promise.all(Array.from({ length: 40 }, () => block.take(em(), 1)))).flat();
    expect(new Set(ids).size).toBe(40);
    expect(sent.statements).toBe(3);
    // Each create's id in the order the creates asked for them.
    expect([...ids].sort((x, y) => (x < y ? -1 : 1))).toEqual(ids);
  });

  it("fails only the create whose refill failed; the creates that shared it take their own", async () => {
    const broken = em();
    const { block, sent } = countedBlock(16, broken);
    const [first, second, third] = await Promise.allSettled([
      block.take(broken, 1),
      block.take(em(), 1),
      block.take(em(), 1),
    ]);
    expect(first).toMatchObject({ status: "rejected", reason: { message: "connection lost" } });
    expect(second).toMatchObject({ status: "fulfilled" });
    expect(third).toMatchObject({ status: "fulfilled" });
    const [a] = (second as PromiseFulfilledResult<bigint[]>).value;
    expect((third as PromiseFulfilledResult<bigint[]>).value).toEqual([a! + 1n]);
    expect(sent.statements).toBe(2);
  });
});
