import type { JsonObject } from "@bufbuild/protobuf";
import { Code, freePort, processMetricsRegistry } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  createTable,
  def,
  failureOf,
  type Harness,
  reasonOf,
  startHarness,
  type Team,
  type TestTable,
  team,
} from "./harness.js";

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
    const { rows } = await h.db.query(
      "select row_id from records.record where table_id = $1 order by row_id",
      [table.tableId.toString()],
    );
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
    await h.db.query("alter table catalog.outbox rename to outbox_away");
    let failure: Awaited<ReturnType<typeof failureOf>>;
    try {
      failure = await failureOf(
        h.catalog.updateField(
          { fieldId: fieldIdOf(table, "Must"), type: FieldType.NUMBER, required: true },
          editor,
        ),
      );
    } finally {
      await h.db.query("alter table catalog.outbox_away rename to outbox");
    }
    expect(failure).toMatchObject({ code: Code.Internal, reason: undefined });
    expect(await checksAnswered()).toBe(checked + 1);
    expect(await catalogState(tableId)).toEqual(before);
    // Records holds no write to the change that never happened: the field may stay empty and
    // take a text that is no number, at once rather than when the marks expire.
    const { rows } = await h.db.query(
      "select count(*)::int as n from records.pending_type_change where table_id = $1",
      [tableId.toString()],
    );
    expect(rows[0].n).toBe(0);
    await h.records.createRecord({ tableId, data: { Note: "no must" } }, editor);
    await h.records.createRecord({ tableId, data: { Must: "twelve" } }, editor);
    const { records } = await h.records.listRecords({ tableId }, await as(t.owner));
    expect(records.map((r) => r.data[table.id.Must!])).toEqual(["12", null, "twelve"]);
  });

  it("masks other records failures as Internal, changing nothing", async () => {
    const table = await tableWith("Broken", FieldType.TEXT, [{ Broken: "2026-01-02" }]);
    const before = await catalogState(table.tableId);
    // Records' own table is away: the check fails inside records.
    await h.db.query("alter table records.record rename to record_away");
    let failure: Awaited<ReturnType<typeof failureOf>>;
    try {
      failure = await failureOf(
        h.catalog.updateField(
          { fieldId: fieldIdOf(table, "Broken"), type: FieldType.DATE },
          await as(t.editor),
        ),
      );
    } finally {
      await h.db.query("alter table records.record_away rename to record");
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
