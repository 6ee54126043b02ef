import { fromBinary, type JsonObject } from "@bufbuild/protobuf";
import {
  applyOnce,
  auditBatchEvents,
  auditChangesOf,
  type BusMessage,
  Code,
  cachedPlan,
  cachePlan,
  createServiceClient,
  planCacheKey,
  SUBJECTS,
  tableSchemaCacheKey,
} from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import {
  type AuditEvent,
  AuditEventBatchSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import { Actor_Type } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { RecordsDeletedSchema } from "@rowbase/proto/rowbase/events/v1/records_events_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CATALOG_CONSUMER, CatalogEvents } from "../src/catalog-events.js";
import { Transactions } from "../src/change-set.js";
import { StoredTables } from "../src/db/user-tables/registry.js";
import { createRecordsOrm } from "../src/service.js";
import { TableSchemas } from "../src/table-schema.js";
import { TypeChanges } from "../src/type-changes.js";
import {
  as,
  createTable,
  def,
  eventsOf,
  eventually,
  failureOf,
  type Harness,
  reasonOf,
  SECRET,
  SERVICE,
  startHarness,
  type Team,
  type TestTable,
  team,
  validationOf,
} from "./harness.js";
import { storedData, storedRows } from "./stored.js";

// What records does on its own: audit and deletion events for its writes, and its part of
// catalog's and organization's changes (CATALOG and ORG streams).

let h: Harness;
let t: Team;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

function stored(tableId: bigint): Promise<JsonObject[]> {
  return storedData(h, tableId);
}

async function usageOf(organizationId: bigint): Promise<bigint> {
  return (await h.records.getRecordUsage({ organizationId }, await as(SERVICE))).records;
}

/** Waits until records' consumer has started numbering the table's `count` autonumber fields. */
async function countersOf(table: TestTable, count: number): Promise<void> {
  await eventually(async () => {
    const { rows } = await h.db.query(
      "select count(*)::int as n from records.autonumber_counter where table_id = $1",
      [table.tableId.toString()],
    );
    expect(rows[0].n).toBe(count);
  });
}

/** Adds an autonumber field "No"; returns its id once the stored records hold `numbers`. */
async function addAutonumberField(table: TestTable, numbers: number[]): Promise<string> {
  const { field } = await h.catalog.createField(
    {
      tableId: table.tableId,
      field: { name: "No", type: FieldType.AUTONUMBER, required: false, description: "" },
    },
    await as(t.owner),
  );
  const id = field!.fieldId.toString();
  await eventually(async () =>
    expect((await stored(table.tableId)).map((d) => d[id])).toEqual(numbers),
  );
  return id;
}

/**
 * Applies `messages` through a consumer of catalog events of its own, as a redelivery would;
 * `meanwhile` runs between a message's chunks and its last transaction.
 */
async function replay(messages: BusMessage[], meanwhile?: () => Promise<void>): Promise<void> {
  const orm = await createRecordsOrm(h.databaseUrl);
  try {
    const tx = new Transactions(orm, { kick() {} }, h.logger);
    const schemas = new TableSchemas(
      createServiceClient(CatalogService, "http://127.0.0.1:9"),
      h.cache,
      SECRET,
      h.logger,
    );
    const tables = new StoredTables(() => orm.em.fork());
    const consumer = new CatalogEvents({
      orm,
      schemas,
      typeChanges: new TypeChanges(tx, tables),
      tables,
      logger: h.logger,
    });
    for (const message of messages) {
      await consumer.prepare(message);
      await meanwhile?.();
      await applyOnce(orm, CATALOG_CONSUMER, message, (em) => consumer.apply(em, message));
    }
  } finally {
    await orm.close();
  }
}

async function seed(table: TestTable, rows: JsonObject[]) {
  const { records } = await h.records.batchCreateRecords(
    { tableId: table.tableId, records: rows.map((data) => ({ data })) },
    await as(t.editor),
  );
  return records;
}

describe("audit and deletion events", () => {
  it("records who changed which value of a record, keyed by field id and labelled by name", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("Age", FieldType.NUMBER),
      def("Seq", FieldType.AUTONUMBER),
    ]);
    const call = await as(t.editor);
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "Ada", Age: 36 } },
      call,
    );
    const rowId = record!.rowId;
    await h.records.updateRecord(
      { tableId: table.tableId, rowId, data: { Age: 37, Name: "Ada" } },
      call,
    );
    await h.records.deleteRecord({ tableId: table.tableId, rowId }, call);

    const audit = (action: string) =>
      eventually(() => {
        const found = eventsOf(h.events, `audit.${action}`, AuditEventSchema).find(
          (e) => e.target?.id === rowId,
        );
        if (!found) throw new Error(`no ${action}`);
        return found;
      });
    const created = await audit("record.created");
    expect(created).toMatchObject({
      organizationId: t.organizationId,
      databaseId: table.databaseId,
      tableId: table.tableId,
      action: "record.created",
      target: { type: "record", id: rowId },
      meta: { actor: { type: Actor_Type.USER, id: t.editor.id } },
    });
    const changes = (event: typeof created) => auditChangesOf(event.changesJson);
    expect(changes(created)).toEqual([
      { key: table.id.Name, label: "Name", old: undefined, new: "Ada" },
      { key: table.id.Age, label: "Age", old: undefined, new: 36 },
      { key: table.id.Seq, label: "Seq", old: undefined, new: 1 },
    ]);
    expect(changes(await audit("record.updated"))).toEqual([
      { key: table.id.Age, label: "Age", old: 36, new: 37 },
    ]);
    expect(changes(await audit("record.deleted"))).toEqual([
      { key: table.id.Name, label: "Name", old: "Ada", new: undefined },
      { key: table.id.Age, label: "Age", old: 37, new: undefined },
      { key: table.id.Seq, label: "Seq", old: 1, new: undefined },
    ]);
    const deleted = await eventually(() => {
      const found = eventsOf(h.events, SUBJECTS.recordsDeleted, RecordsDeletedSchema).find(
        (e) => e.tableId === table.tableId,
      );
      if (!found) throw new Error("no records.deleted");
      return found;
    });
    expect(deleted).toMatchObject({ organizationId: t.organizationId, rowIds: [rowId] });
  });

  it("keeps every change of updates racing on one record, each audited against what it replaced", async () => {
    const names = Array.from({ length: 8 }, (_, i) => `Racing ${i}`);
    const table = await createTable(
      h,
      t.owner,
      t.organizationId,
      names.map((name) => def(name, FieldType.NUMBER)),
    );
    const call = await as(t.editor);
    const { record } = await h.records.createRecord({ tableId: table.tableId, data: {} }, call);
    const rowId = record!.rowId;
    // Each update writes its own field, all at once, twice over: one that read the record before
    // another's write must not write back what it read.
    for (const value of [1, 2]) {
      await Promise.all(
        names.map((name) =>
          h.records.updateRecord({ tableId: table.tableId, rowId, data: { [name]: value } }, call),
        ),
      );
    }
    const [row] = await storedRows(h, table.tableId, [rowId]);
    expect(row!.data).toEqual(Object.fromEntries(names.map((name) => [table.id[name], 2])));
    const audited = await eventually(() => {
      const found = eventsOf(h.events, SUBJECTS.audit("record.updated"), AuditEventSchema).filter(
        (e) => e.tableId === table.tableId,
      );
      if (found.length < 2 * names.length) throw new Error(`${found.length} audit events`);
      return found;
    });
    expect(
      audited.flatMap((e) => auditChangesOf(e.changesJson).map((c) => [c.label, c.old, c.new])),
    ).toEqual(
      expect.arrayContaining(
        names.flatMap((name) => [
          [name, undefined, 1],
          [name, 1, 2],
        ]),
      ),
    );
    expect(audited).toHaveLength(2 * names.length);
  });

  it("audits a delete racing updates of its record against the values it deleted", async () => {
    const names = Array.from({ length: 8 }, (_, i) => `Raced ${i}`);
    const table = await createTable(
      h,
      t.owner,
      t.organizationId,
      names.map((name) => def(name, FieldType.NUMBER)),
    );
    const call = await as(t.editor);
    for (let round = 1; round <= 4; round++) {
      const { record } = await h.records.createRecord({ tableId: table.tableId, data: {} }, call);
      const rowId = record!.rowId;
      // The delete reads the record, then an update may write it before the delete does: the
      // values the delete audits must be those it removed, every update that went through.
      const [deleted, ...updates] = await Promise.allSettled([
        h.records.deleteRecord({ tableId: table.tableId, rowId }, call),
        ...names.map((name) =>
          h.records.updateRecord({ tableId: table.tableId, rowId, data: { [name]: round } }, call),
        ),
      ]);
      expect(deleted.status).toBe("fulfilled");
      const kept = names.filter((_, i) => updates[i]!.status === "fulfilled");
      for (const update of updates) {
        if (update.status === "rejected") {
          expect(await reasonOf(Promise.reject(update.reason))).toBe("record_not_found");
        }
      }
      expect(await storedRows(h, table.tableId, [rowId])).toEqual([]);
      const audit = await eventually(() => {
        const found = eventsOf(h.events, SUBJECTS.audit("record.deleted"), AuditEventSchema).find(
          (e) => e.target?.id === rowId,
        );
        if (!found) throw new Error("no record.deleted");
        return found;
      });
      expect(auditChangesOf(audit.changesJson).map((c) => [c.label, c.old, c.new])).toEqual(
        kept.map((name) => [name, round, undefined]),
      );
    }
  });

  it("deletes a record once when deletes of it race: one answer, one count, one event", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const call = await as(t.editor);
    // More of the organization's records than the races delete, so that a count given back
    // more than once shows (it never goes below 0).
    const rowIds = (
      await seed(
        table,
        Array.from({ length: 12 }, () => ({})),
      )
    ).map((r) => r.rowId);
    const raced = rowIds.slice(0, 4);
    const usage = async () => {
      const { rows } = await h.db.query("select records.record_usage($1) as records", [
        t.organizationId.toString(),
      ]);
      return Number(rows[0].records);
    };
    const before = await usage();
    for (const rowId of raced) {
      const answers = await Promise.allSettled(
        Array.from({ length: 6 }, () =>
          h.records.deleteRecord({ tableId: table.tableId, rowId }, call),
        ),
      );
      expect(answers.filter((a) => a.status === "fulfilled")).toHaveLength(1);
      for (const answer of answers) {
        if (answer.status === "rejected") {
          expect(await reasonOf(Promise.reject(answer.reason))).toBe("record_not_found");
        }
      }
    }
    expect(await usage()).toBe(before - raced.length);
    // Once the relay has published everything written, each record has one event of each kind.
    await eventually(async () => {
      const { rows } = await h.db.query(
        "select count(*)::int as n from records.outbox where published_at is null",
      );
      expect(rows[0].n).toBe(0);
    });
    await eventually(() => {
      const announced = eventsOf(h.events, SUBJECTS.recordsDeleted, RecordsDeletedSchema)
        .filter((e) => e.tableId === table.tableId)
        .flatMap((e) => e.rowIds);
      const audited = eventsOf(h.events, SUBJECTS.audit("record.deleted"), AuditEventSchema)
        .filter((e) => e.tableId === table.tableId)
        .map((e) => e.target?.id);
      expect(announced).toEqual(raced);
      expect(audited).toEqual(raced);
    });
  });

  it("keeps an audit event of huge values small enough for the bus, noting their size", async () => {
    const fields = Array.from({ length: 8 }, (_, i) => def(`Long ${i}`, FieldType.LONG_TEXT));
    const table = await createTable(h, t.owner, t.organizationId, fields);
    const texts = (c: string) => Object.fromEntries(fields.map((f) => [f.name, c.repeat(90_000)]));
    const call = await as(t.editor);
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: texts("a") },
      call,
    );
    const rowId = record!.rowId;
    // Old and new values of 720,000 characters each: as they are, 1.4 MB, past NATS's 1 MiB.
    await h.records.updateRecord({ tableId: table.tableId, rowId, data: texts("b") }, call);
    const updated = await eventually(() => {
      const found = eventsOf(h.events, SUBJECTS.audit("record.updated"), AuditEventSchema).find(
        (e) => e.target?.id === rowId,
      );
      if (!found) throw new Error("no record.updated");
      return found;
    });
    const changes = auditChangesOf(updated.changesJson);
    expect(changes.map((c) => c.label)).toEqual(fields.map((f) => f.name));
    expect(changes.flatMap((c) => [c.old, c.new])).toContainEqual({ omitted_bytes: 90_002 });
    // The relay marks a row published after NATS took it, so the count drains a moment later.
    await eventually(async () => {
      const { rows } = await h.db.query(
        "select count(*)::int as n from records.outbox where published_at is null",
      );
      expect(rows[0].n).toBe(0);
    });
  });

  it("announces a batch delete once, with every row", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const ids = (await seed(table, [{}, {}, {}])).map((r) => r.rowId);
    await h.records.batchDeleteRecords({ tableId: table.tableId, rowIds: ids }, await as(t.editor));
    const event = await eventually(() => {
      const found = eventsOf(h.events, SUBJECTS.recordsDeleted, RecordsDeletedSchema).find(
        (e) => e.tableId === table.tableId,
      );
      if (!found) throw new Error("no records.deleted");
      return found;
    });
    expect(event.rowIds).toEqual(ids);
  });
});

describe("audit events of batches", () => {
  it("sends a batch's audit events as one audit.batch message, one event per record", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const call = await as(t.editor);
    const created = await seed(table, [{ Name: "a" }, { Name: "b" }, { Name: "c" }]);
    const ids = created.map((r) => r.rowId);
    await h.records.batchUpdateRecords(
      {
        tableId: table.tableId,
        records: [
          { rowId: ids[0]!, data: { Name: "A" } },
          { rowId: ids[1]!, data: { Name: "b" } },
          { rowId: ids[2]!, data: { Name: "C" } },
        ],
      },
      call,
    );
    await h.records.batchDeleteRecords({ tableId: table.tableId, rowIds: ids }, call);

    // Each batch write's events in compact messages: the shared parts once, then the records.
    const messages = () =>
      h.events
        .filter((m) => m.subject === SUBJECTS.auditBatch)
        .map((m) => ({ id: m.id, batch: fromBinary(AuditEventBatchSchema, m.data) }))
        .filter(({ batch }) => batch.common?.tableId === table.tableId);
    await eventually(() => expect(messages()).toHaveLength(3));
    for (const { batch } of messages()) {
      expect(batch.events).toEqual([]);
      expect(batch.common?.target?.id).toBe(0n);
    }
    const batches = () => messages().map(({ id, batch }) => auditBatchEvents(batch, id));
    const [creates, updates, deletes] = batches();
    const summary = (events: AuditEvent[] | undefined) =>
      events?.map((e) => [
        e.action,
        e.target?.id,
        e.meta?.actor?.id,
        auditChangesOf(e.changesJson).map((c) => [c.key, c.old, c.new]),
      ]);
    const name = table.id.Name!;
    expect(summary(creates)).toEqual(
      ["a", "b", "c"].map((v, i) => [
        "record.created",
        ids[i],
        t.editor.id,
        [[name, undefined, v]],
      ]),
    );
    // The unchanged record has no update event.
    expect(summary(updates)).toEqual([
      ["record.updated", ids[0], t.editor.id, [[name, "a", "A"]]],
      ["record.updated", ids[2], t.editor.id, [[name, "c", "C"]]],
    ]);
    expect(summary(deletes)).toEqual(
      ["A", "b", "C"].map((v, i) => [
        "record.deleted",
        ids[i],
        t.editor.id,
        [[name, v, undefined]],
      ]),
    );
    expect(new Set(batches().flatMap((b) => b.map((e) => e.meta?.eventId))).size).toBe(8);
    // None of them also came alone.
    const alone = ["created", "updated", "deleted"].flatMap((verb) =>
      eventsOf(h.events, SUBJECTS.audit(`record.${verb}`), AuditEventSchema).filter(
        (e) => e.tableId === table.tableId,
      ),
    );
    expect(alone).toEqual([]);
  });
});

describe("catalog changes", () => {
  it("drops a deleted field's values from every record", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("Age", FieldType.NUMBER),
    ]);
    await seed(table, [{ Name: "a", Age: 1 }, { Age: 2 }, { Name: "c" }]);
    await h.catalog.deleteField({ fieldId: BigInt(table.id.Age!) }, await as(t.owner));
    // Catalog marks the cached schema with its commit: the field is gone from reads at once.
    const { records } = await h.records.listRecords({ tableId: table.tableId }, await as(t.viewer));
    expect(records.map((r) => r.data)).toEqual([
      { [table.id.Name!]: "a" },
      { [table.id.Name!]: null },
      { [table.id.Name!]: "c" },
    ]);
    await eventually(async () =>
      expect(await stored(table.tableId)).toEqual([
        { [table.id.Name!]: "a" },
        {},
        { [table.id.Name!]: "c" },
      ]),
    );
  });

  it("deletes a deleted table's records and gives their count back", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    await seed(table, [{}, {}, {}, {}]);
    const before = await usageOf(t.organizationId);
    const changes = async () =>
      (
        await h.db.query(
          "select count(*)::int as n from records.record_change where table_id = $1",
          [table.tableId.toString()],
        )
      ).rows[0].n;
    expect(await changes()).toBe(4);
    await h.catalog.deleteTable({ tableId: table.tableId }, await as(t.owner));
    await eventually(async () => expect(await stored(table.tableId)).toEqual([]));
    expect(await usageOf(t.organizationId)).toBe(before - 4n);
    // Its change log goes too: no route reads it any more.
    expect(await changes()).toBe(0);
    expect(
      await reasonOf(
        h.records.createRecord({ tableId: table.tableId, data: {} }, await as(t.editor)),
      ),
    ).toBe("table_not_found");
  });

  // Without an autonumber field a create is one statement (create_gate); with one, a transaction.
  it.each([
    ["a text field", [def("Name", FieldType.TEXT)]],
    ["an autonumber field", [def("Name", FieldType.TEXT), def("No", FieldType.AUTONUMBER)]],
  ])(
    "refuses a create that waited for its table's deletion, and counts nothing (%s)",
    async (_, fields) => {
      const table = await createTable(h, t.owner, t.organizationId, fields);
      // The autonumber field's numbering (records' consumer) takes the table's lock too: let it
      // finish first, so that the create is the one waiting below.
      await countersOf(table, fields.filter((f) => f.type === FieldType.AUTONUMBER).length);
      const before = await usageOf(t.organizationId);
      // The deletion of the table as CatalogEvents runs it: the table's lock, then the mark.
      const deletion = await h.db.connect();
      try {
        await deletion.query("begin");
        await deletion.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [
          `records.table:${table.tableId}`,
        ]);
        const create = reasonOf(
          h.records.createRecord({ tableId: table.tableId, data: {} }, await as(t.editor)),
        );
        await eventually(async () => {
          const { rows } = await deletion.query(
            `select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted
             and database = (select oid from pg_database where datname = current_database())`,
          );
          expect(rows[0].n).toBe(1);
        });
        await deletion.query("insert into records.deleted_table (table_id) values ($1)", [
          table.tableId.toString(),
        ]);
        await deletion.query("commit");
        expect(await create).toBe("table_not_found");
      } finally {
        // Closed, not returned to the pool: a failure above must not leave the lock held.
        deletion.release(true);
      }
      expect(await stored(table.tableId)).toEqual([]);
      expect(await usageOf(t.organizationId)).toBe(before);
    },
  );

  it("deletes the records of every table of a deleted database", async () => {
    const first = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const { table: second } = await h.catalog.createTable(
      { databaseId: first.databaseId, name: "Second", description: "", fields: [] },
      await as(t.owner),
    );
    await seed(first, [{}, {}]);
    await h.records.createRecord({ tableId: second!.tableId, data: {} }, await as(t.editor));
    const before = await usageOf(t.organizationId);
    await h.catalog.deleteDatabase({ databaseId: first.databaseId }, await as(t.owner));
    await eventually(async () => {
      expect(await stored(first.tableId)).toEqual([]);
      expect(await stored(second!.tableId)).toEqual([]);
    });
    expect(await usageOf(t.organizationId)).toBe(before - 3n);
  });

  it("refuses a type change a stored value cannot make, then converts the values", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Code", FieldType.TEXT),
      def("Other", FieldType.TEXT),
    ]);
    const rows = await seed(table, [{ Code: "12" }, { Code: "x" }, { Code: " 7.0 " }, {}]);
    const owner = await as(t.owner);
    const refusal = await failureOf(
      h.catalog.updateField({ fieldId: BigInt(table.id.Code!), type: FieldType.NUMBER }, owner),
    );
    expect(refusal).toMatchObject({
      code: Code.FailedPrecondition,
      reason: "field_type_change_invalid",
    });
    expect(JSON.parse(refusal.metadata.row_ids!)).toEqual([Number(rows[1]!.rowId)]);
    expect(refusal.metadata.count).toBe("1");

    await h.records.updateRecord(
      { tableId: table.tableId, rowId: rows[1]!.rowId, data: { Code: "13" } },
      await as(t.editor),
    );
    await h.catalog.updateField({ fieldId: BigInt(table.id.Code!), type: FieldType.NUMBER }, owner);
    await eventually(async () =>
      expect((await stored(table.tableId)).map((d) => d[table.id.Code!])).toEqual([
        12,
        13,
        7,
        undefined,
      ]),
    );
    // And back: numbers become text.
    await h.catalog.updateField({ fieldId: BigInt(table.id.Code!), type: FieldType.TEXT }, owner);
    await eventually(async () =>
      expect((await stored(table.tableId)).map((d) => d[table.id.Code!])).toEqual([
        "12",
        "13",
        "7",
        undefined,
      ]),
    );
  });

  it("checks stored values against new options of the same type, and re-rounds numbers", async () => {
    const choices = { choices: [{ name: "A" }, { name: "B" }] };
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Price", FieldType.NUMBER, { decimals: 2 }),
      def("Code", FieldType.TEXT),
      def("Kind", FieldType.SINGLE_SELECT, choices),
    ]);
    await seed(table, [{ Price: 1.25, Code: "hello world", Kind: "A" }, { Price: 2 }]);
    const owner = await as(t.owner);
    const field = (name: string) => table.fields.find((f) => f.name === name)!;
    const optionsOf = async (name: string) =>
      (await h.catalog.listFields({ tableId: table.tableId }, owner)).fields.find(
        (f) => f.name === name,
      )!.options;
    const before = await stored(table.tableId);

    // A shorter max_length than a stored text, a max below a stored number, a removed choice
    // still in use: refused, the field and the values as they were.
    const refused: [string, JsonObject][] = [
      ["Code", { max_length: 5 }],
      ["Price", { decimals: 2, max: 1.5 }],
      ["Kind", { choices: [(field("Kind").options!.choices as JsonObject[])[1]!] }],
    ];
    for (const [name, options] of refused) {
      const refusal = await failureOf(
        h.catalog.updateField({ fieldId: field(name).fieldId, options }, owner),
      );
      expect(refusal.reason, name).toBe("field_type_change_invalid");
      expect(await optionsOf(name)).toEqual(field(name).options);
    }
    expect(await stored(table.tableId)).toEqual(before);

    // Fewer decimals: the stored numbers are rounded to them.
    await h.catalog.updateField(
      { fieldId: field("Price").fieldId, options: { decimals: 0 } },
      owner,
    );
    await eventually(async () =>
      expect((await stored(table.tableId)).map((d) => d[table.id.Price!])).toEqual([1, 2]),
    );
    // A choice nobody uses can go.
    const [a] = field("Kind").options!.choices as JsonObject[];
    await h.catalog.updateField(
      { fieldId: field("Kind").fieldId, options: { choices: [a!] } },
      owner,
    );
    expect((await optionsOf("Kind"))!.choices).toEqual([a]);
  });

  it("refuses making a field required while a record has no value, or a change that empties one", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("Tags", FieldType.MULTI_SELECT, { choices: [{ name: "A" }] }),
      def("Code", FieldType.TEXT),
    ]);
    const rows = await seed(table, [
      { Name: "a", Tags: ["A"], Code: "12" },
      { Name: "", Tags: [], Code: " " },
      { Code: "7" },
    ]);
    const owner = await as(t.owner);
    const editor = await as(t.editor);
    const field = (name: string) => table.fields.find((f) => f.name === name)!;
    const requiredOf = async (name: string) =>
      (await h.catalog.listFields({ tableId: table.tableId }, owner)).fields.find(
        (f) => f.name === name,
      )!.required;
    const before = await stored(table.tableId);

    // An empty text, an empty list and no value at all are each empty: refused, with how many.
    for (const name of ["Name", "Tags"]) {
      const refusal = await failureOf(
        h.catalog.updateField({ fieldId: field(name).fieldId, required: true }, owner),
      );
      expect(refusal.reason, name).toBe("field_type_change_invalid");
      expect(refusal.metadata.count, name).toBe("2");
      expect(JSON.parse(refusal.metadata.row_ids!), name).toEqual(
        rows.slice(1).map((row) => Number(row.rowId)),
      );
      expect(refusal.metadata.message).toMatch(/is empty, and the field is to be required/);
      expect(await requiredOf(name), name).toBe(false);
    }
    expect(await stored(table.tableId)).toEqual(before);

    // Once every record holds a name, the field can be required; that changes no value.
    for (const row of rows.slice(1)) {
      await h.records.updateRecord(
        { tableId: table.tableId, rowId: row.rowId, data: { Name: "n" } },
        editor,
      );
    }
    await h.catalog.updateField({ fieldId: field("Name").fieldId, required: true }, owner);
    expect(await requiredOf("Name")).toBe(true);

    // A blank text is a value, but as a number it is none: a required field cannot become one.
    await h.catalog.updateField({ fieldId: field("Code").fieldId, required: true }, owner);
    const refusal = await failureOf(
      h.catalog.updateField({ fieldId: field("Code").fieldId, type: FieldType.NUMBER }, owner),
    );
    expect(refusal.reason).toBe("field_type_change_invalid");
    expect(JSON.parse(refusal.metadata.row_ids!)).toEqual([Number(rows[1]!.rowId)]);
    expect(refusal.metadata.message).toMatch(/would be empty as number/);
    await h.records.updateRecord(
      { tableId: table.tableId, rowId: rows[1]!.rowId, data: { Code: "5" } },
      editor,
    );
    await h.catalog.updateField({ fieldId: field("Code").fieldId, type: FieldType.NUMBER }, owner);
    await eventually(async () =>
      expect((await stored(table.tableId)).map((d) => d[table.id.Code!])).toEqual([12, 5, 7]),
    );

    // A required field's record with no value (stored before required was checked) does not
    // hold up a change that empties nothing.
    await h.db.query(
      `update org_${t.organizationId}.t_${table.tableId} set f_${table.id.Name} = null
       where row_id = $1`,
      [rows[2]!.rowId.toString()],
    );
    await h.catalog.updateField(
      { fieldId: field("Name").fieldId, options: { max_length: 50 } },
      owner,
    );
  });

  it("answers CheckFieldTypeChange for services only", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Mail", FieldType.TEXT)]);
    await seed(table, [{ Mail: "ada@example.com" }, { Mail: "not mail" }]);
    const { fields } = await h.catalog.listFields({ tableId: table.tableId }, await as(t.owner));
    const field = fields[0]!;
    const refusal = await failureOf(
      h.records.checkFieldTypeChange({ field, newType: FieldType.EMAIL }, await as(SERVICE)),
    );
    expect(refusal.reason).toBe("field_type_change_invalid");
    expect(refusal.metadata.message).toMatch(/e-mail address/);
    await h.records.checkFieldTypeChange(
      { field, newType: FieldType.LONG_TEXT },
      await as(SERVICE),
    );
    expect(
      await reasonOf(
        h.records.checkFieldTypeChange({ field, newType: FieldType.LONG_TEXT }, await as(t.owner)),
      ),
    ).toBe("internal_only");
  });

  it("turns a created_at field into a datetime holding each record's creation time", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("Made", FieldType.CREATED_AT),
    ]);
    const rows = await seed(table, [{ Name: "a" }, { Name: "b" }]);
    const made = rows.map((r) => r.data![table.id.Made!]);
    await h.catalog.updateField(
      { fieldId: BigInt(table.id.Made!), type: FieldType.DATETIME },
      await as(t.owner),
    );
    await eventually(async () =>
      expect((await stored(table.tableId)).map((d) => d[table.id.Made!])).toEqual(made),
    );
  });

  it("renames stored choices, swaps included, in single and multi selects", async () => {
    const choices = { choices: [{ name: "A" }, { name: "B" }, { name: "C" }] };
    const table = await createTable(h, t.owner, t.organizationId, [
      def("One", FieldType.SINGLE_SELECT, choices),
      def("Many", FieldType.MULTI_SELECT, choices),
    ]);
    await seed(table, [
      { One: "A", Many: ["A", "B", "C"] },
      { One: "B", Many: ["B"] },
      { One: "C", Many: [] },
    ]);
    const owner = await as(t.owner);
    const swap = async (fieldName: string) => {
      const field = table.fields.find((f) => f.name === fieldName)!;
      const [a, b, c] = (field.options!.choices as JsonObject[]).map((ch) => ch.id as string);
      await h.catalog.updateField(
        {
          fieldId: field.fieldId,
          options: {
            choices: [
              { id: a!, name: "B" },
              { id: b!, name: "A" },
              { id: c!, name: "Cee" },
            ],
          },
        },
        owner,
      );
    };
    await swap("One");
    await swap("Many");
    const expected = [
      { [table.id.One!]: "B", [table.id.Many!]: ["B", "A", "Cee"] },
      { [table.id.One!]: "A", [table.id.Many!]: ["A"] },
      { [table.id.One!]: "Cee", [table.id.Many!]: [] },
    ];
    await eventually(async () => expect(await stored(table.tableId)).toEqual(expected));

    // Applying the same events again (a redelivery) changes nothing: each is applied once.
    const renames = h.events.filter((e) => e.subject === SUBJECTS.fieldChoicesRenamed);
    expect(renames.length).toBeGreaterThanOrEqual(2);
    await replay(renames);
    expect(await stored(table.tableId)).toEqual(expected);
  });

  it("numbers existing records when an autonumber field is added, and goes on from there", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    await seed(table, [{ Name: "a" }, { Name: "b" }, { Name: "c" }]);
    const id = await addAutonumberField(table, [1, 2, 3]);
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "d" } },
      await as(t.editor),
    );
    expect(record!.data![id]).toBe(4);
  });
});

describe("a write whose schema still has a deleted field", () => {
  it("is checked again against the table as it is, and stores nothing under the field", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("Gone", FieldType.TEXT),
    ]);
    const { tableId } = table;
    const name = table.id.Name!;
    // The consumer's events of the table's own fields are applied (and their evictions done).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const [row] = await seed(table, [{ Name: "a", Gone: "g" }]);
    const key = tableSchemaCacheKey(tableId);
    const before = await h.cache.get(key);
    expect(before).not.toBeNull();
    await h.catalog.deleteField({ fieldId: BigInt(table.id.Gone!) }, await as(t.owner));
    await eventually(async () => expect(await stored(tableId)).toEqual([{ [name]: "a" }]));
    await eventually(async () => expect(await h.cache.get(key)).toMatch(/^[0-9]+$/));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Each write's view: the schema as it was cached before the deletion (a write that reads
    // it again from catalog caches the new one).
    const stale = () => h.cache.set(key, before!, 60);
    const editor = await as(t.editor);
    const unknown = [
      { key: "Gone", message: "is not a field of this table", source: "body", code: "not_found" },
    ];

    await stale();
    expect(
      await validationOf(
        h.records.createRecord({ tableId, data: { Name: "b", Gone: "x" } }, editor),
      ),
    ).toEqual(unknown);
    await stale();
    expect(
      await validationOf(
        h.records.updateRecord({ tableId, rowId: row!.rowId, data: { Gone: "y" } }, editor),
      ),
    ).toEqual(unknown);
    // Writes of the other fields go ahead.
    await stale();
    await h.records.updateRecord({ tableId, rowId: row!.rowId, data: { Name: "a2" } }, editor);
    await stale();
    await h.records.createRecord({ tableId, data: { Name: "c" } }, editor);
    expect(await stored(tableId)).toEqual([{ [name]: "a2" }, { [name]: "c" }]);
  });
});

describe("a create whose schema predates an autonumber field", () => {
  // Such a create read the table's schema before the field was added, and runs after the
  // field's existing records were numbered: without a check its records never get a number.
  it.each([
    ["without autonumber fields (one statement)", [def("Name", FieldType.TEXT)]],
    [
      "with another autonumber field (a transaction)",
      [def("Name", FieldType.TEXT), def("First", FieldType.AUTONUMBER)],
    ],
  ])("numbers the records of a table that had none %s", async (_, fields) => {
    const table = await createTable(h, t.owner, t.organizationId, fields);
    // The consumer's events of the table's own fields are applied (and their evictions done).
    await countersOf(table, fields.length - 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await seed(table, [{ Name: "a" }]);
    const key = tableSchemaCacheKey(table.tableId);
    const before = await h.cache.get(key);
    expect(before).not.toBeNull();
    const id = await addAutonumberField(table, [1]);
    // The create's view: the schema as it was cached before the field (put back once records'
    // consumer has dropped its value after its commit).
    await eventually(async () => expect(await h.cache.get(key)).toMatch(/^[0-9]+$/));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await h.cache.set(key, before!, 60);
    expect(await h.cache.get(key)).toBe(before);

    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "b" } },
      await as(t.editor),
    );
    expect(record!.data![id]).toBe(2);
    await seed(table, [{ Name: "c" }, { Name: "d" }]);
    expect((await stored(table.tableId)).map((d) => [d[table.id.Name!], d[id]])).toEqual([
      ["a", 1],
      ["b", 2],
      ["c", 3],
      ["d", 4],
    ]);
    expect(await usageOf(t.organizationId)).toBeGreaterThanOrEqual(4n);
  });
});

describe("a create whose schema still has a deleted autonumber field", () => {
  it("writes without it, and does not start the field's counter again", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("No", FieldType.AUTONUMBER),
    ]);
    await countersOf(table, 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await seed(table, [{ Name: "a" }]);
    const key = tableSchemaCacheKey(table.tableId);
    const before = await h.cache.get(key);
    expect(before).not.toBeNull();
    await h.catalog.deleteField({ fieldId: BigInt(table.id.No!) }, await as(t.owner));
    const counter = async () =>
      (
        await h.db.query(
          "select last_value::int, deleted from records.autonumber_counter where table_id = $1",
          [table.tableId.toString()],
        )
      ).rows;
    await eventually(async () =>
      expect(await counter()).toEqual([{ last_value: 1, deleted: true }]),
    );
    await eventually(async () => expect(await h.cache.get(key)).toMatch(/^[0-9]+$/));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await h.cache.set(key, before!, 60);

    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "b" } },
      await as(t.editor),
    );
    expect(record!.data).toEqual({ [table.id.Name!]: "b" });
    await seed(table, [{ Name: "c" }]);
    expect(await stored(table.tableId)).toEqual([
      { [table.id.Name!]: "a" },
      { [table.id.Name!]: "b" },
      { [table.id.Name!]: "c" },
    ]);
    expect(await counter()).toEqual([{ last_value: 1, deleted: true }]);
  });
});

describe("an autonumber field changed to a number", () => {
  it("keeps its values and no longer makes creates read the schema again", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("No", FieldType.AUTONUMBER),
    ]);
    await countersOf(table, 1);
    await seed(table, [{ Name: "a" }, { Name: "b" }]);
    const gate = async () =>
      (
        await h.db.query(
          "select records.create_gate($1, $2, 0, 1000000, '{}', '{}', '{}') as answer",
          [table.tableId.toString(), t.organizationId.toString()],
        )
      ).rows[0].answer;
    // A create that numbers nothing, while the field still numbers: its schema is stale.
    expect(await gate()).toBe("stale");
    await h.catalog.updateField(
      { fieldId: BigInt(table.id.No!), type: FieldType.NUMBER },
      await as(t.owner),
    );
    await eventually(async () => expect(await gate()).toBe("ok"));
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "c", No: 7 } },
      await as(t.editor),
    );
    expect(record!.data![table.id.No!]).toBe(7);
    expect((await stored(table.tableId)).map((d) => d[table.id.No!])).toEqual([1, 2, 7]);
  });
});

describe("a create whose fresh schema is stale too", () => {
  it("tries three schemas, then answers Unavailable and writes nothing", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("No", FieldType.AUTONUMBER),
    ]);
    await countersOf(table, 1);
    await seed(table, [{ Name: "a" }]);
    const usage = await usageOf(t.organizationId);
    // As if the field were deleted just after each schema was read: catalog keeps serving it.
    await h.db.query("update records.autonumber_counter set deleted = true where table_id = $1", [
      table.tableId.toString(),
    ]);
    const failure = await failureOf(
      h.records.createRecord({ tableId: table.tableId, data: { Name: "b" } }, await as(t.editor)),
    );
    expect(failure.code).toBe(Code.Unavailable);
    expect(await stored(table.tableId)).toEqual([{ [table.id.Name!]: "a", [table.id.No!]: 1 }]);
    expect(await usageOf(t.organizationId)).toBe(usage);
  });
});

describe("organization deletion", () => {
  it("deletes the organization's records and its count", async () => {
    const owner = await h.user("Leaving");
    const { organization } = await h.org.createOrganization(
      { name: "Leaving", organizationSlug: "" },
      await as(owner),
    );
    const organizationId = organization!.organizationId;
    const table = await createTable(h, owner, organizationId, [def("Name", FieldType.TEXT)]);
    await h.records.batchCreateRecords(
      { tableId: table.tableId, records: [{ data: {} }, { data: {} }] },
      await as(owner),
    );
    expect(await usageOf(organizationId)).toBe(2n);
    await h.org.deleteOrganization({ organizationId }, await as(owner));
    await eventually(async () => {
      // The organization's schema went with every table in it, and their registry rows.
      const { rows } = await h.db.query(
        `select (select count(*) from pg_namespace where nspname = $2)::int as schemas,
                (select count(*) from records.user_table where organization_id = $1)::int as tables`,
        [organizationId.toString(), `org_${organizationId}`],
      );
      expect(rows[0]).toEqual({ schemas: 0, tables: 0 });
      expect(await usageOf(organizationId)).toBe(0n);
    });
    const { rows } = await h.db.query(
      "select 1 from records.deleted_organization where organization_id = $1",
      [organizationId.toString()],
    );
    expect(rows).toHaveLength(1);
  });

  it("marks the plan entry deleted again, for a deletion whose commit could not", async () => {
    const owner = await h.user("Unmarked");
    const { organization } = await h.org.createOrganization(
      { name: "Unmarked", organizationSlug: "" },
      await as(owner),
    );
    const organizationId = organization!.organizationId;
    const getPlan = async () => h.org.getPlan({ organizationId }, await as(SERVICE));
    const plan = await cachedPlan(h.cache, organizationId, getPlan);
    // Records' and files' consumers wait for these locks while the entry is made what a
    // deletion that could not reach the cache leaves: the plan read before it. Files', which
    // marks the entry too, is held until the end.
    const holding = async (scope: string) => {
      const client = await h.db.connect();
      await client.query("begin");
      await client.query("select pg_advisory_xact_lock_shared(hashtextextended($1, 0))", [
        `${scope}.organization:${organizationId}`,
      ]);
      return async () => {
        await client.query("rollback");
        client.release();
      };
    };
    const releaseFiles = await holding("files");
    try {
      const releaseRecords = await holding("records");
      try {
        await h.org.deleteOrganization({ organizationId }, await as(owner));
        await h.cache.del(planCacheKey(organizationId));
        await cachePlan(h.cache, organizationId, 0n, plan);
      } finally {
        await releaseRecords();
      }
      // Organization gone, from the entry alone.
      const unasked = () => Promise.reject(new Error("asked organization"));
      await eventually(async () =>
        expect(await reasonOf(cachedPlan(h.cache, organizationId, unasked))).toBe(
          "organization_not_found",
        ),
      );
    } finally {
      await releaseFiles();
    }
  });

  // Records' ORG consumer deletes the counters of tables with records only (it knows a table's
  // organization through its records); catalog's DatabaseDeleted names every table, empty or not.
  it("leaves no autonumber counter behind, of tables with records or without", async () => {
    const owner = await h.user("Numbered");
    const { organization } = await h.org.createOrganization(
      { name: "Numbered", organizationSlug: "" },
      await as(owner),
    );
    const organizationId = organization!.organizationId;
    const fields = [def("No", FieldType.AUTONUMBER)];
    const full = await createTable(h, owner, organizationId, fields, "Full");
    const empty = await createTable(h, owner, organizationId, fields, "Empty");
    await countersOf(full, 1);
    await countersOf(empty, 1);
    await h.records.batchCreateRecords(
      { tableId: full.tableId, records: [{ data: {} }] },
      await as(owner),
    );
    await h.org.deleteOrganization({ organizationId }, await as(owner));
    await countersOf(full, 0);
    await countersOf(empty, 0);
  });
});
