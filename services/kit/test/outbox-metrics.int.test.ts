import { Migration } from "@mikro-orm/migrations";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createLogger,
  createMetricsRegistry,
  createOrm,
  enqueueEvent,
  type MetricsRegistry,
  migrate,
  NatsBus,
  type Orm,
  OUTBOX_TABLE_SQL,
  OutboxRelay,
} from "../src/index.js";
import { createTestDatabase, testInfra, uniqueName } from "../src/testing.js";

class CreateOutbox extends Migration {
  override up() {
    this.addSql(OUTBOX_TABLE_SQL);
  }
}

const logger = createLogger("kit-test", "silent");
const SCHEMA = "kit_lag";

let registry: MetricsRegistry;
let orm: Orm;
let bus: NatsBus;
let drop: () => Promise<void>;

beforeAll(async () => {
  const infra = await testInfra();
  const db = await createTestDatabase(infra.databaseUrl);
  drop = db.drop;
  registry = createMetricsRegistry();
  orm = await createOrm({
    url: db.url,
    schema: SCHEMA,
    entities: [],
    migrations: [CreateOutbox],
    poolSize: 4,
    metrics: registry,
  });
  await migrate(orm, SCHEMA);
  // No stream takes the subjects yet: publishing fails, as while NATS is down.
  bus = await NatsBus.connect(infra.natsUrl, logger, uniqueName("kit"));
});

afterAll(async () => {
  await bus?.deleteStreams(["LAG"]);
  await bus?.close();
  await orm?.close();
  await drop?.();
});

async function value(name: string, labels: Record<string, string>): Promise<number | undefined> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const found = metric?.values.find((v) =>
    Object.entries(labels).every(([key, label]) => v.labels[key] === label),
  );
  return found?.value;
}

describe("outbox lag gauges", () => {
  it("show pending events and the age of the oldest while publishing fails, and 0 once published", async () => {
    await orm.em.fork().transactional(async (em) => {
      await enqueueEvent(em, "lag.one", new Uint8Array([1]));
      await enqueueEvent(em, "lag.two", new Uint8Array([2]));
    });
    await orm.em.fork().execute("update outbox set created_at = now() - interval '90 seconds'");
    const relay = new OutboxRelay(orm, bus, logger, {
      intervalMs: 50,
      lagSampleMs: 0,
      metrics: registry,
    });
    relay.start();
    try {
      await expect.poll(() => value("rowbase_outbox_pending_events", { schema: SCHEMA })).toBe(2);
      const age = await value("rowbase_outbox_oldest_pending_age_seconds", { schema: SCHEMA });
      expect(age).toBeGreaterThanOrEqual(90);
      expect(age).toBeLessThan(120);

      await bus.ensureStreams([{ name: "LAG", subjects: ["lag.>"], maxAgeSeconds: 60 }]);
      await expect
        .poll(() => value("rowbase_outbox_pending_events", { schema: SCHEMA }), { timeout: 5000 })
        .toBe(0);
      expect(await value("rowbase_outbox_oldest_pending_age_seconds", { schema: SCHEMA })).toBe(0);
    } finally {
      await relay.stop();
    }
  });
});

describe("connection pool gauges", () => {
  it("report the ORM's pool by schema: its limit, and connections idle or in use", async () => {
    await orm.em.fork().execute("select 1");
    expect(await value("rowbase_db_pool_max_connections", { schema: SCHEMA })).toBe(4);
    const idle = await value("rowbase_db_pool_connections", { schema: SCHEMA, state: "idle" });
    expect(idle).toBeGreaterThanOrEqual(1);

    // Hold a connection in a transaction: it shows as used while the transaction is open.
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const transaction = orm.em.fork().transactional(async (em) => {
      await em.execute("select 1");
      await held;
    });
    await expect
      .poll(() => value("rowbase_db_pool_connections", { schema: SCHEMA, state: "used" }))
      .toBe(1);
    release();
    await transaction;
    expect(await value("rowbase_db_pool_connections", { schema: SCHEMA, state: "used" })).toBe(0);
    expect(await value("rowbase_db_pool_waiting_clients", { schema: SCHEMA })).toBe(0);
  });
});
