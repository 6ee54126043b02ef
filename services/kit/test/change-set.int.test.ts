import { Writable } from "node:stream";
import { fromBinary } from "@bufbuild/protobuf";
import { Migration } from "@mikro-orm/migrations";
import type { EntityManager } from "@mikro-orm/postgresql";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import { Actor_Type } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  type CallContext,
  ChangeSet,
  createLogger,
  createOrm,
  migrate,
  type Orm,
  OUTBOX_TABLE_SQL,
  query,
  Transactions,
} from "../src/index.js";
import { createTestDatabase, testInfra } from "../src/testing.js";

class CreateTables extends Migration {
  override up() {
    this.addSql(OUTBOX_TABLE_SQL);
    this.addSql("create table item (id int primary key, name text not null)");
    // Checked at the commit: a row naming a missing parent makes the commit itself fail.
    this.addSql(
      `create table link (id int primary key,
         parent int references item (id) deferrable initially deferred)`,
    );
  }
}

/** A change set that gathers names during the work and writes them before the commit. */
class BufferingChangeSet extends ChangeSet {
  readonly names: string[] = [];

  override async beforeCommit(): Promise<void> {
    for (const [i, name] of this.names.entries()) {
      await query(this.em, "insert into item (id, name) values ($1, $2)", [100 + i, name]);
    }
  }
}

const CONTEXT: CallContext = { principal: undefined, requestId: "change-set-test" };

let orm: Orm;
let drop: () => Promise<void>;
let kicks = 0;
/** The events each kick handed the relay (event ids), in order. */
let kicked: string[] = [];
const warnings: { msg: string; err?: { message: string } }[] = [];
let tx: Transactions<BufferingChangeSet>;

function capture(): Writable {
  return new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) {
        const parsed = JSON.parse(line);
        if (parsed.level === 40) warnings.push(parsed);
      }
      done();
    },
  });
}

async function names(): Promise<string[]> {
  const rows = await query<{ name: string }>(orm.em.fork(), "select name from item order by id");
  return rows.map((row) => row.name);
}

async function outbox(): Promise<{ subject: string; payload: Buffer; event_id: string }[]> {
  return query(orm.em.fork(), "select subject, payload, event_id from outbox order by seq");
}

async function audit(changes: ChangeSet, action: string): Promise<void> {
  await changes.publish(`audit.${action}`, AuditEventSchema, {
    organizationId: 1n,
    databaseId: 0n,
    tableId: 0n,
    action,
    changesJson: "[]",
  });
}

function insert(em: EntityManager, id: number, name: string): Promise<unknown> {
  return query(em, "insert into item (id, name) values ($1, $2)", [id, name]);
}

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  drop = db.drop;
  orm = await createOrm({
    url: db.url,
    schema: "kit_test",
    entities: [],
    migrations: [CreateTables],
  });
  await migrate(orm, "kit_test");
  tx = new Transactions(
    orm,
    {
      kick: (committed = []) => {
        kicks += 1;
        kicked.push(...committed.map((entry) => entry.eventId));
      },
    },
    createLogger("kit-test", "info", capture()),
    (em, context) => new BufferingChangeSet(em, context),
  );
});

afterAll(async () => {
  await orm?.close();
  await drop?.();
});

beforeEach(async () => {
  await query(orm.em.fork(), "truncate item, link, outbox");
  kicks = 0;
  kicked = [];
  warnings.length = 0;
});

describe("Transactions.run", () => {
  it("commits the work and its events, then wakes the relay with them and takes the steps in order", async () => {
    const seen: string[][] = [];
    const result = await tx.run(
      { principal: { kind: "user", userId: 7n, sessionId: "s" }, requestId: "req-1" },
      async (changes) => {
        await insert(changes.em, 1, "a");
        await audit(changes, "item.created");
        // Each step sees the committed change from another connection.
        changes.afterCommit(async () => void seen.push(["first", ...(await names())]));
        changes.afterCommit(() => void seen.push(["second"]));
        return "done";
      },
    );
    expect(result).toBe("done");
    expect(seen).toEqual([["first", "a"], ["second"]]);
    expect(kicks).toBe(1);
    const [event, ...more] = await outbox();
    expect(more).toEqual([]);
    expect(event!.subject).toBe("audit.item.created");
    expect(kicked).toEqual([event!.event_id]);
    const meta = fromBinary(AuditEventSchema, event!.payload).meta!;
    expect(meta.requestId).toBe("req-1");
    expect(meta.actor).toMatchObject({ type: Actor_Type.USER, id: 7n });
  });

  it("does not wake the relay when nothing was published, and names the system without a principal", async () => {
    await tx.run(CONTEXT, (changes) => insert(changes.em, 1, "a"));
    expect(kicks).toBe(0);
    await tx.run(CONTEXT, (changes) => audit(changes, "item.updated"));
    expect(kicks).toBe(1);
    const [event] = await outbox();
    expect(fromBinary(AuditEventSchema, event!.payload).meta!.actor).toMatchObject({
      type: Actor_Type.SYSTEM,
    });
  });

  it("a failing work leaves no row and no event, takes no step, and runs the undos last first once the locks are gone", async () => {
    await insert(orm.em.fork(), 1, "a");
    const undone: string[] = [];
    const steps: string[] = [];
    const failure = new Error("refused");
    await expect(
      tx.run(CONTEXT, async (changes) => {
        await query(changes.em, "update item set name = 'changed' where id = 1");
        await insert(changes.em, 2, "b");
        await audit(changes, "item.updated");
        changes.afterCommit(() => void steps.push("step"));
        changes.onAbandon(async () => {
          // The row the work locked is free again: the undo runs after the rollback.
          const [row] = await query<{ name: string }>(
            orm.em.fork(),
            "select name from item where id = 1 for update nowait",
          ).catch(() => [{ name: "locked" }]);
          undone.push(`first saw ${row?.name}`);
        });
        changes.onAbandon(async () => void undone.push("second"));
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(undone).toEqual(["second", "first saw a"]);
    expect(steps).toEqual([]);
    expect(kicks).toBe(0);
    expect(await names()).toEqual(["a"]);
    expect(await outbox()).toEqual([]);
  });

  it("runs the other undos when one fails, logs it, and rethrows the work's error", async () => {
    const undone: string[] = [];
    await expect(
      tx.run(CONTEXT, async (changes) => {
        changes.onAbandon(async () => void undone.push("first"));
        changes.onAbandon(async () => {
          throw new Error("undo failed");
        });
        throw new Error("work failed");
      }),
    ).rejects.toThrow("work failed");
    expect(undone).toEqual(["first"]);
    expect(warnings).toMatchObject([
      { msg: "an undo of an abandoned change failed", err: { message: "undo failed" } },
    ]);
  });

  it("a step that fails after the commit is logged; the call keeps its result and the later steps run", async () => {
    const steps: string[] = [];
    const result = await tx.run(CONTEXT, async (changes) => {
      await insert(changes.em, 1, "a");
      changes.afterCommit(() => {
        throw new Error("cache down");
      });
      changes.afterCommit(() => void steps.push("later"));
      return 42;
    });
    expect(result).toBe(42);
    expect(steps).toEqual(["later"]);
    expect(await names()).toEqual(["a"]);
    expect(warnings).toMatchObject([
      { msg: "a step after a commit failed", err: { message: "cache down" } },
    ]);
  });

  it("a commit that fails runs no undo and takes no step", async () => {
    const undone: string[] = [];
    const steps: string[] = [];
    await expect(
      tx.run(CONTEXT, async (changes) => {
        await query(changes.em, "insert into link (id, parent) values (1, 999)");
        await audit(changes, "link.created");
        changes.onAbandon(async () => void undone.push("undo"));
        changes.afterCommit(() => void steps.push("step"));
      }),
    ).rejects.toThrow(/link_parent_fkey/);
    expect(undone).toEqual([]);
    expect(steps).toEqual([]);
    expect(kicks).toBe(0);
    expect(await outbox()).toEqual([]);
  });

  it("writes what the change set gathered before the commit, and a failure there abandons the change", async () => {
    await tx.run(CONTEXT, async (changes) => {
      await insert(changes.em, 1, "a");
      changes.names.push("gathered");
    });
    expect(await names()).toEqual(["a", "gathered"]);

    const undone: string[] = [];
    await expect(
      tx.run(CONTEXT, async (changes) => {
        await insert(changes.em, 2, "b");
        // Its id is taken: the write before the commit fails.
        changes.names.push("again");
        changes.onAbandon(async () => void undone.push("undo"));
      }),
    ).rejects.toThrow(/item_pkey/);
    expect(undone).toEqual(["undo"]);
    expect(await names()).toEqual(["a", "gathered"]);
  });
});

describe("Transactions.within", () => {
  it("works in the owner's transaction; its steps wait for the owner's commit", async () => {
    const steps: string[] = [];
    const { result, afterCommit } = await orm.em.fork().transactional(async (em) => {
      const within = await tx.within(em, CONTEXT, async (changes) => {
        await insert(changes.em, 1, "a");
        await audit(changes, "item.created");
        changes.names.push("gathered");
        changes.afterCommit(() => void steps.push("step"));
        return "done";
      });
      // Nothing is visible, nothing woken, before the owner commits.
      expect(await names()).toEqual([]);
      expect(steps).toEqual([]);
      return within;
    });
    expect(result).toBe("done");
    expect(await names()).toEqual(["a", "gathered"]);
    expect(kicks).toBe(0);
    await afterCommit();
    expect(steps).toEqual(["step"]);
    expect(kicks).toBe(1);
    expect(await outbox()).toHaveLength(1);
  });

  it("a throw runs the undos and reaches the owner, whose rollback removes the work", async () => {
    const undone: string[] = [];
    await expect(
      orm.em.fork().transactional((em) =>
        tx.within(em, CONTEXT, async (changes) => {
          await insert(changes.em, 1, "a");
          changes.onAbandon(async () => void undone.push("undo"));
          throw new Error("refused");
        }),
      ),
    ).rejects.toThrow("refused");
    expect(undone).toEqual(["undo"]);
    expect(await names()).toEqual([]);
  });
});
