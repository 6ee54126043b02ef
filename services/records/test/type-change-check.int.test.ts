import type { JsonObject } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import {
  Code,
  DEFAULT_RPC_TIMEOUT_MS,
  freePort,
  processMetricsRegistry,
  startGrpcServer,
} from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  createTable,
  def,
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
} from "./harness.js";
import { storedRows } from "./stored.js";

// Catalog asks the real records service (RecordsService.CheckFieldTypeChange, as the catalog
// service) before it changes a field's type, and changes nothing when records refuses, fails or
// cannot be reached. Records' own side of the check is in events.int.test.ts.

let h: Harness;
let t: Team;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

const CHECK = "rowbase.records.v1.RecordsService/CheckFieldTypeChange";

/** How many CheckFieldTypeChange calls records has answered with `code` (process metrics). */
async function checksAnswered(code = "OK"): Promise<number> {
  const series = `rowbase_rpc_server_handled_total{procedure="${CHECK}",code="${code}"}`;
  const text = await processMetricsRegistry().metrics();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/** What catalog holds of a table's fields, and its outbox size: a refused change leaves both. */
async function catalogState(tableId: bigint) {
  const fields = await h.db.query("select * from catalog.fields where table_id = $1 order by id", [
    tableId.toString(),
  ]);
  const outbox = await h.db.query("select count(*)::int as n from catalog.outbox");
  return { fields: fields.rows, outbox: outbox.rows[0].n };
}

async function tableWith(name: string, type: FieldType, values: JsonObject[]): Promise<TestTable> {
  const table = await createTable(h, t.owner, t.organizationId, [def(name, type)], name);
  if (values.length > 0) {
    await h.records.batchCreateRecords(
      { tableId: table.tableId, records: values.map((data) => ({ data })) },
      await as(t.editor),
    );
  }
  return table;
}

const fieldIdOf = (table: TestTable, name: string) => BigInt(table.id[name]!);

/**
 * The table's fields whose values from before a change records made are still kept (the change
 * neither committed by catalog nor released), with the kept column's type.
 */
async function keptOf(table: TestTable) {
  const { rows } = await h.db.query(
    `select k.field_id::text, format_type(a.atttypid, a.atttypmod) as type
     from records.kept_column k
       left join pg_attribute a on a.attrelid = to_regclass($2)
         and a.attname = 'f_' || k.field_id || '_prev' and not a.attisdropped
     where k.table_id = $1 order by k.field_id`,
    [table.tableId.toString(), `org_${t.organizationId}.t_${table.tableId}`],
  );
  return rows;
}

/** The PostgreSQL type of a field's column in the table's user table. */
async function columnTypeOf(table: TestTable, name: string): Promise<string | undefined> {
  const { rows } = await h.db.query(
    `select format_type(atttypid, atttypmod) as type from pg_attribute
     where attrelid = to_regclass($1) and attname = $2 and not attisdropped`,
    [`org_${t.organizationId}.t_${table.tableId}`, `f_${table.id[name]}`],
  );
  return rows[0]?.type;
}

/** Runs `work` with catalog's outbox away: every change it commits fails, after the check. */
async function outboxAway<T>(work: () => Promise<T>): Promise<T> {
  await h.db.query("alter table catalog.outbox rename to outbox_away");
  try {
    return await work();
  } finally {
    await h.db.query("alter table catalog.outbox_away rename to outbox");
  }
}

describe("type changes checked by records", () => {
  it("asks records, as a service, before a type change and goes ahead when it agrees", async () => {
    const table = await tableWith("Clean", FieldType.TEXT, [{ Clean: "12" }, { Clean: " 7.5 " }]);
    const before = await checksAnswered();
    const { field } = await h.catalog.updateField(
      { fieldId: fieldIdOf(table, "Clean"), type: FieldType.NUMBER },
      await as(t.editor),
    );
    expect(field!.type).toBe(FieldType.NUMBER);
    expect(await checksAnswered()).toBe(before + 1);
    // Records answers the check to services only: catalog asked as one.
    const { fields } = await h.catalog.listFields({ tableId: table.tableId }, await as(t.owner));
    expect(
      await reasonOf(
        h.records.checkFieldTypeChange(
          { field: fields[0]!, newType: FieldType.TEXT },
          await as(t.editor),
        ),
      ),
    ).toBe("internal_only");
  });

  it("asks when a field is made required and when it is made optional again", async () => {
    const table = await tableWith("Must", FieldType.TEXT, [{ Must: "a" }]);
    const fieldId = fieldIdOf(table, "Must");
    const before = await checksAnswered();
    const editor = await as(t.editor);
    await h.catalog.updateField({ fieldId, required: true }, editor);
    await h.catalog.updateField({ fieldId, required: false }, editor);
    expect(await checksAnswered()).toBe(before + 2);
    // Optional again: records holds no write to it as required any more.
    await h.records.createRecord({ tableId: table.tableId, data: {} }, editor);
  });

  it("does not ask when the type stays or the pair has no conversion", async () => {
    const table = await tableWith("Quiet", FieldType.NUMBER, [{ Quiet: 1 }]);
    const fieldId = fieldIdOf(table, "Quiet");
    const asked = async () =>
      (await checksAnswered()) + (await checksAnswered("FailedPrecondition"));
    const before = await asked();
    await h.catalog.updateField({ fieldId, name: "Quieter" }, await as(t.editor));
    expect(
      await reasonOf(
        h.catalog.updateField({ fieldId, type: FieldType.BOOLEAN }, await as(t.editor)),
      ),
    ).toBe("field_type_change_invalid");
    expect(await asked()).toBe(before);

    // Not even with records out of reach: nothing asks it.
    const away = await h.catalogReplica({
      RECORDS_GRPC_URL: `http://127.0.0.1:${await freePort()}`,
    });
    try {
      await away.catalog.updateField({ fieldId, name: "Quietest" }, await as(t.editor));
      expect(
        await reasonOf(
          away.catalog.updateField({ fieldId, type: FieldType.BOOLEAN }, await as(t.editor)),
        ),
      ).toBe("field_type_change_invalid");
    } finally {
      await away.stop();
    }
  });

  it("refuses the change when a stored value does not convert, changing nothing", async () => {
    const table = await tableWith("Dirty", FieldType.TEXT, [
      { Dirty: "2026-01-02" },
      { Dirty: "x" },
    ]);
    const rows = await storedRows(h, table.tableId);
    const before = await catalogState(table.tableId);
    const refusal = await failureOf(
      h.catalog.updateField(
        { fieldId: fieldIdOf(table, "Dirty"), type: FieldType.DATE },
        await as(t.editor),
      ),
    );
    expect(refusal).toMatchObject({
      code: Code.FailedPrecondition,
      reason: "field_type_change_invalid",
      metadata: { count: "1", message: expect.stringMatching(/^record \d+: /) },
    });
    expect(JSON.parse(refusal.metadata.row_ids!)).toEqual([Number(rows[1]!.row_id)]);
    expect(await catalogState(table.tableId)).toEqual(before);
  });

  it("converts the column before catalog commits, keeping the old values only until it has", async () => {
    const table = await tableWith("Code", FieldType.TEXT, [{ Code: "12" }, { Code: " 7 " }, {}]);
    await h.catalog.updateField(
      { fieldId: fieldIdOf(table, "Code"), type: FieldType.NUMBER },
      await as(t.editor),
    );
    // The route answered: the column is converted, and the next read sees numbers.
    expect(await columnTypeOf(table, "Code")).toBe("numeric");
    const { records } = await h.records.listRecords({ tableId: table.tableId }, await as(t.owner));
    expect(records.map((r) => r.data[table.id.Code!])).toEqual([12, 7, null]);
    // Catalog's event of the committed change drops the values kept from before it.
    await eventually(async () => expect(await keptOf(table)).toEqual([]));
    const { rows } = await h.db.query(
      "select count(*)::int as n from pg_attribute where attrelid = to_regclass($1) and attname = $2",
      [`org_${t.organizationId}.t_${table.tableId}`, `f_${table.id.Code}_prev`],
    );
    expect(rows[0].n).toBe(0);
  });

  it("lets records go of a change it agreed to that catalog did not commit", async () => {
    const table = await createTable(
      h,
      t.owner,
      t.organizationId,
      [def("Must", FieldType.TEXT), def("Note", FieldType.TEXT)],
      "Abandoned",
    );
    const { tableId } = table;
    const editor = await as(t.editor);
    await h.records.createRecord({ tableId, data: { Must: "12" } }, editor);
    const before = await catalogState(tableId);
    const checked = await checksAnswered();
    // Records agrees to the number field made required; then catalog's transaction fails (its
    // outbox is away) and rolls back.
    const failure = await outboxAway(() =>
      failureOf(
        h.catalog.updateField(
          { fieldId: fieldIdOf(table, "Must"), type: FieldType.NUMBER, required: true },
          editor,
        ),
      ),
    );
    expect(failure).toMatchObject({ code: Code.Internal, reason: undefined });
    expect(await checksAnswered()).toBe(checked + 1);
    expect(await catalogState(tableId)).toEqual(before);
    // Records took back the conversion it had made for the change that never happened: the
    // column holds text again, and the field may stay empty and take a text that is no number.
    expect(await keptOf(table)).toEqual([]);
    expect(await columnTypeOf(table, "Must")).toBe("text");
    await h.records.createRecord({ tableId, data: { Note: "no must" } }, editor);
    await h.records.createRecord({ tableId, data: { Must: "twelve" } }, editor);
    const { records } = await h.records.listRecords({ tableId }, await as(t.owner));
    expect(records.map((r) => r.data[table.id.Must!])).toEqual(["12", null, "twelve"]);
  });

  it("lets records go of a change whose check's answer was lost, by the change's id", async () => {
    const table = await createTable(
      h,
      t.owner,
      t.organizationId,
      [def("Must", FieldType.TEXT), def("Note", FieldType.TEXT)],
      "Unanswered",
    );
    const { tableId } = table;
    const editor = await as(t.editor);
    await h.records.createRecord({ tableId, data: { Must: "12" } }, editor);
    // Between catalog and records: the check reaches records, which agrees and leaves its
    // marks, but its answer is lost on the way back; a release goes through.
    const releaseDeadlines: number[] = [];
    const front = await startGrpcServer({
      routes(router) {
        router.service(RecordsService, {
          async checkFieldTypeChange(req) {
            await h.records.checkFieldTypeChange(req, await as(SERVICE));
            throw new ConnectError("connection lost", Code.Unavailable);
          },
          async releaseFieldTypeChange(req, ctx) {
            releaseDeadlines.push(ctx.timeoutMs() ?? Number.POSITIVE_INFINITY);
            return h.records.releaseFieldTypeChange(req, await as(SERVICE));
          },
        });
      },
      services: [RecordsService],
      host: "127.0.0.1",
      port: 0,
      logger: h.logger,
      internalSecret: SECRET,
    });
    const away = await h.catalogReplica({ RECORDS_GRPC_URL: `http://127.0.0.1:${front.port}` });
    try {
      const before = await catalogState(tableId);
      expect(
        await failureOf(
          away.catalog.updateField(
            { fieldId: fieldIdOf(table, "Must"), type: FieldType.NUMBER, required: true },
            editor,
          ),
        ),
      ).toMatchObject({ code: Code.Unavailable });
      expect(await catalogState(tableId)).toEqual(before);
    } finally {
      await away.stop();
      await front.close();
    }
    // Catalog released the change by the id it gave it: records holds no write to it. The
    // release's deadline and a check's stay within the gateway's (10 s), so that a records that
    // hangs still gets the caller catalog's answer.
    expect(releaseDeadlines).toHaveLength(1);
    expect(DEFAULT_RPC_TIMEOUT_MS + releaseDeadlines[0]!).toBeLessThan(10_000);
    expect(await keptOf(table)).toEqual([]);
    expect(await columnTypeOf(table, "Must")).toBe("text");
    await h.records.createRecord({ tableId, data: { Note: "no must" } }, editor);
    await h.records.createRecord({ tableId, data: { Must: "twelve" } }, editor);
    const { records } = await h.records.listRecords({ tableId }, await as(t.owner));
    expect(records.map((r) => r.data[table.id.Must!])).toEqual(["12", null, "twelve"]);
  });

  it("masks other records failures as Internal, changing nothing", async () => {
    const table = await tableWith("Broken", FieldType.TEXT, [{ Broken: "2026-01-02" }]);
    const before = await catalogState(table.tableId);
    // The table's user table is away: the check fails inside records.
    const relation = `org_${t.organizationId}.t_${table.tableId}`;
    await h.db.query(`alter table ${relation} rename to t_away`);
    let failure: Awaited<ReturnType<typeof failureOf>>;
    try {
      failure = await failureOf(
        h.catalog.updateField(
          { fieldId: fieldIdOf(table, "Broken"), type: FieldType.DATE },
          await as(t.editor),
        ),
      );
    } finally {
      await h.db.query(`alter table org_${t.organizationId}.t_away rename to t_${table.tableId}`);
    }
    expect(failure).toMatchObject({ code: Code.Internal, reason: undefined });
    expect(await catalogState(table.tableId)).toEqual(before);
  });

  it("answers Unavailable when records cannot be reached, changing nothing", async () => {
    const table = await tableWith("Waiting", FieldType.TEXT, [{ Waiting: "2026-01-02" }]);
    // A catalog whose records address has nothing listening.
    const away = await h.catalogReplica({
      RECORDS_GRPC_URL: `http://127.0.0.1:${await freePort()}`,
    });
    try {
      const before = await catalogState(table.tableId);
      expect(
        await failureOf(
          away.catalog.updateField(
            { fieldId: fieldIdOf(table, "Waiting"), type: FieldType.DATE },
            await as(t.editor),
          ),
        ),
      ).toMatchObject({ code: Code.Unavailable });
      expect(await catalogState(table.tableId)).toEqual(before);
    } finally {
      await away.stop();
    }
  });
});
