import type { JsonObject } from "@bufbuild/protobuf";
import { auditChangesOf } from "@rowbase/kit";
import { type Field, FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  FieldCreatedSchema,
  FieldDeletedSchema,
  TableDeletedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  eventOf,
  eventsOf,
  failureOf,
  type Harness,
  optionErrorsOf,
  reasonOf,
  startHarness,
  stateOf,
  type Team,
  team,
} from "./harness.js";

// Link, lookup and rollup fields as catalog keeps them: a link's inverse, what their options
// may name, and what a deletion takes along. Records does not run here: no stored values are
// checked, and no link values exist.

let h: Harness;
let t: Team;
let databaseId: bigint;
let otherDatabaseId: bigint;
let outsiderTableId: bigint;
let tables = 0;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
  const create = async (organizationId: bigint, who = t.owner) =>
    (
      await h.catalog.createDatabase(
        { organizationId, name: "Links", description: "" },
        await as(who),
      )
    ).database!.databaseId;
  databaseId = await create(t.organizationId);
  otherDatabaseId = await create(t.organizationId);
  const elsewhere = await create(t.outsiderOrganizationId, t.outsider);
  const { table } = await h.catalog.createTable(
    { databaseId: elsewhere, name: "Theirs", description: "", fields: [] },
    await as(t.outsider),
  );
  outsiderTableId = table!.tableId;
});

afterAll(async () => {
  await h?.stop();
});

async function newTable(name?: string, inDatabase = databaseId): Promise<bigint> {
  tables += 1;
  const { table } = await h.catalog.createTable(
    { databaseId: inDatabase, name: name ?? `Table ${tables}`, description: "", fields: [] },
    await as(t.editor),
  );
  return table!.tableId;
}

async function createField(
  tableId: bigint,
  name: string,
  type: FieldType,
  options?: JsonObject,
  required = false,
): Promise<Field> {
  const { field } = await h.catalog.createField(
    { tableId, field: { name, type, options, required, description: "" } },
    await as(t.editor),
  );
  return field!;
}

const link = (tableId: bigint, name: string, to: bigint, extra: JsonObject = {}) =>
  createField(tableId, name, FieldType.LINK, { table_id: Number(to), ...extra });

async function fieldsOf(tableId: bigint): Promise<Field[]> {
  const { fields } = await h.catalog.listFields({ tableId }, await as(t.viewer));
  expect(fields.map((f) => f.position)).toEqual(fields.map((_, i) => i));
  return fields;
}

async function namesOf(tableId: bigint): Promise<string[]> {
  return (await fieldsOf(tableId)).map((f) => f.name);
}

/** The field of the table named `name`. */
async function fieldNamed(tableId: bigint, name: string): Promise<Field> {
  const found = (await fieldsOf(tableId)).find((f) => f.name === name);
  expect(found).toBeDefined();
  return found!;
}

/** Everything catalog stores for both organizations, and the outbox size. */
async function everything(): Promise<unknown> {
  return [await stateOf(h.db, t.organizationId), await stateOf(h.db, t.outsiderOrganizationId)];
}

async function schemaVersionOf(tableId: bigint): Promise<string> {
  const { rows } = await h.db.query(
    "select schema_version::text as v from catalog.tables where id = $1",
    [tableId.toString()],
  );
  return rows[0].v;
}

describe("creating a link", () => {
  it("creates its inverse in the target table, and announces both with their final options", async () => {
    const orders = await newTable("Orders");
    const customers = await newTable("Customers");
    await createField(customers, "Name", FieldType.TEXT);
    const versionBefore = await schemaVersionOf(customers);
    const customer = await link(orders, "Customer", customers, { multiple: false });
    const inverse = await fieldNamed(customers, "Orders");
    expect(customer.options).toEqual({
      table_id: Number(customers),
      multiple: false,
      inverse_field_id: Number(inverse.fieldId),
    });
    expect(inverse).toMatchObject({
      tableId: customers,
      type: FieldType.LINK,
      options: {
        table_id: Number(orders),
        multiple: true,
        inverse_field_id: Number(customer.fieldId),
      },
      required: false,
      description: "",
      position: 1,
    });
    expect(await schemaVersionOf(customers)).not.toBe(versionBefore);

    for (const field of [customer, inverse]) {
      const created = await eventOf(
        h,
        "catalog.field.created",
        FieldCreatedSchema,
        (e) => e.fieldId === field.fieldId,
      );
      expect(created).toMatchObject({
        organizationId: t.organizationId,
        databaseId,
        tableId: field.tableId,
        name: field.name,
        type: FieldType.LINK,
        options: field.options,
      });
      const audit = await eventOf(
        h,
        "audit.field.created",
        AuditEventSchema,
        (e) => e.target?.id === field.fieldId,
      );
      expect(audit.tableId).toBe(field.tableId);
      expect(auditChangesOf(audit.changesJson)[2]).toMatchObject({ new: field.options });
    }
  });

  it("names the inverse after the linking table, numbered past names used regardless of case", async () => {
    const projects = await newTable("Projects");
    const people = await newTable("People");
    await createField(people, "projects", FieldType.TEXT);
    await link(projects, "Lead", people);
    await link(projects, "Members", people);
    await createField(people, "PROJECTS (4)", FieldType.TEXT);
    await link(projects, "Sponsor", people);
    expect(await namesOf(people)).toEqual([
      "projects",
      "Projects (2)",
      "Projects (3)",
      "PROJECTS (4)",
      "Projects (5)",
    ]);
  });

  it("links a table to itself, the inverse in the same table; a link may be required", async () => {
    const staff = await newTable("Staff");
    await createField(staff, "Name", FieldType.TEXT);
    const manager = await link(staff, "Manager", staff, { multiple: false });
    const reports = await fieldNamed(staff, "Staff");
    expect(manager.options).toEqual({
      table_id: Number(staff),
      multiple: false,
      inverse_field_id: Number(reports.fieldId),
    });
    expect(reports.options).toEqual({
      table_id: Number(staff),
      multiple: true,
      inverse_field_id: Number(manager.fieldId),
    });
    expect(await namesOf(staff)).toEqual(["Name", "Manager", "Staff"]);
    const mentor = await createField(
      staff,
      "Mentor",
      FieldType.LINK,
      { table_id: Number(staff) },
      true,
    );
    expect(mentor.required).toBe(true);
    expect((await fieldNamed(staff, "Staff (2)")).required).toBe(false);
  });

  it("answers a table of another database or organization, or none, alike, writing nothing", async () => {
    const source = await newTable();
    const elsewhere = await newTable("Elsewhere", otherDatabaseId);
    const before = await everything();
    for (const target of [elsewhere, outsiderTableId, 99_999_999n]) {
      expect(await optionErrorsOf(link(source, "Away", target))).toEqual([
        { key: "options.table_id", message: "must be a table of the same database" },
      ]);
    }
    expect(await everything()).toEqual(before);
    expect(await namesOf(source)).toEqual([]);
  });

  it("refuses an inverse_field_id from the client, writing nothing", async () => {
    const source = await newTable();
    const target = await newTable();
    const other = await createField(target, "Other", FieldType.TEXT);
    const before = await everything();
    for (const inverse of [Number(other.fieldId), 0, "x"]) {
      expect(
        await optionErrorsOf(link(source, "Back", target, { inverse_field_id: inverse })),
      ).toEqual([{ key: "options.inverse_field_id", message: "is set by the server" }]);
    }
    expect(await everything()).toEqual(before);
  });

  it("counts the inverse against the target table's field limit", async () => {
    const source = await newTable();
    const { table } = await h.catalog.createTable(
      {
        databaseId,
        name: "Full",
        description: "",
        fields: Array.from({ length: 500 }, (_, i) => ({
          name: `F${i}`,
          type: FieldType.BOOLEAN,
          required: false,
          description: "",
        })),
      },
      await as(t.editor),
    );
    const full = table!.tableId;
    const before = await everything();
    expect(await failureOf(link(source, "To full", full))).toMatchObject({
      reason: "field_limit_exceeded",
    });
    expect(await everything()).toEqual(before);
  });

  it("takes links as initial fields of a new table, refusing a foreign target on its index", async () => {
    const target = await newTable("Target");
    const elsewhere = await newTable("Far", otherDatabaseId);
    const before = await everything();
    expect(
      await optionErrorsOf(
        h.catalog.createTable(
          {
            databaseId,
            name: "New",
            description: "",
            fields: [
              { name: "Title", type: FieldType.TEXT, required: false, description: "" },
              {
                name: "Far",
                type: FieldType.LINK,
                options: { table_id: Number(elsewhere) },
                required: false,
                description: "",
              },
            ],
          },
          await as(t.editor),
        ),
      ),
    ).toEqual([
      { key: "fields.1.options.table_id", message: "must be a table of the same database" },
    ]);
    expect(await everything()).toEqual(before);

    const { table, fields } = await h.catalog.createTable(
      {
        databaseId,
        name: "New",
        description: "",
        fields: [
          {
            name: "Target",
            type: FieldType.LINK,
            options: { table_id: Number(target) },
            required: false,
            description: "",
          },
        ],
      },
      await as(t.editor),
    );
    const inverse = await fieldNamed(target, "New");
    expect(fields[0]!.options).toEqual({
      table_id: Number(target),
      multiple: true,
      inverse_field_id: Number(inverse.fieldId),
    });
    expect(inverse.options).toEqual({
      table_id: Number(table!.tableId),
      multiple: true,
      inverse_field_id: Number(fields[0]!.fieldId),
    });
    await eventOf(
      h,
      "catalog.field.created",
      FieldCreatedSchema,
      (e) => e.fieldId === inverse.fieldId,
    );
  });
});

describe("lookups and rollups", () => {
  /** Orders linking to Products, with fields of each type a computation may meet. */
  async function shop() {
    const orders = await newTable();
    const products = await newTable();
    const note = await createField(orders, "Note", FieldType.TEXT);
    const product = await link(orders, "Product", products);
    const back = await fieldNamed(
      products,
      (await h.catalog.getTable({ tableId: orders }, await as(t.viewer))).table!.name,
    );
    const price = await createField(products, "Price", FieldType.NUMBER, { decimals: 2 });
    const name = await createField(products, "Name", FieldType.TEXT);
    const since = await createField(products, "Since", FieldType.DATE);
    const serial = await createField(products, "Serial", FieldType.AUTONUMBER);
    const photo = await createField(products, "Photo", FieldType.FILE);
    const notes = await createField(products, "Order notes", FieldType.LOOKUP, {
      link_field_id: Number(back.fieldId),
      field_id: Number(note.fieldId),
    });
    return { orders, products, note, product, back, price, name, since, serial, photo, notes };
  }

  it("creates them through a link of their table, over a field of the linked table", async () => {
    const s = await shop();
    const lookup = await createField(s.orders, "Product name", FieldType.LOOKUP, {
      link_field_id: Number(s.product.fieldId),
      field_id: Number(s.name.fieldId),
    });
    expect(lookup.options).toEqual({
      link_field_id: Number(s.product.fieldId),
      field_id: Number(s.name.fieldId),
    });
    const ok: [string, bigint][] = [
      ["count", s.name.fieldId],
      ["count_values", s.name.fieldId],
      ["sum", s.price.fieldId],
      ["avg", s.serial.fieldId],
      ["min", s.since.fieldId],
      ["max", s.price.fieldId],
    ];
    for (const [fn, fieldId] of ok) {
      const rollup = await createField(s.orders, `R ${fn}`, FieldType.ROLLUP, {
        link_field_id: Number(s.product.fieldId),
        field_id: Number(fieldId),
        function: fn,
      });
      expect(rollup.options).toMatchObject({ function: fn });
    }
  });

  it("refuses what they may not name, each on its key, writing nothing", async () => {
    const s = await shop();
    const through = (linkFieldId: bigint | number, fieldId: bigint | number, fn?: string) => ({
      link_field_id: Number(linkFieldId),
      field_id: Number(fieldId),
      ...(fn === undefined ? {} : { function: fn }),
    });
    const before = await everything();
    const cases: [FieldType, JsonObject, string, string][] = [
      // Not a link, a link of another table, no field.
      [
        FieldType.LOOKUP,
        through(s.note.fieldId, s.name.fieldId),
        "link_field_id",
        "must be a link field of the same table",
      ],
      [
        FieldType.LOOKUP,
        through(s.back.fieldId, s.note.fieldId),
        "link_field_id",
        "must be a link field of the same table",
      ],
      [
        FieldType.ROLLUP,
        through(99_999_999, s.name.fieldId, "count"),
        "link_field_id",
        "must be a link field of the same table",
      ],
      // A field of the own table, none.
      [
        FieldType.LOOKUP,
        through(s.product.fieldId, s.note.fieldId),
        "field_id",
        "must be a field of the linked table",
      ],
      [
        FieldType.LOOKUP,
        through(s.product.fieldId, 99_999_999),
        "field_id",
        "must be a field of the linked table",
      ],
      // One level deep, no files.
      ...[s.back, s.notes, s.photo].map((f): [FieldType, JsonObject, string, string] => [
        FieldType.LOOKUP,
        through(s.product.fieldId, f.fieldId),
        "field_id",
        "cannot be a link, lookup, rollup or file field (lookups and rollups go one link deep)",
      ]),
      [
        FieldType.ROLLUP,
        through(s.product.fieldId, s.name.fieldId, "sum"),
        "function",
        "sum needs a number or autonumber field, not text",
      ],
      [
        FieldType.ROLLUP,
        through(s.product.fieldId, s.since.fieldId, "avg"),
        "function",
        "avg needs a number or autonumber field, not date",
      ],
      [
        FieldType.ROLLUP,
        through(s.product.fieldId, s.name.fieldId, "max"),
        "function",
        "max needs a number, autonumber, date, datetime, created_at or updated_at field, not text",
      ],
    ];
    for (const [type, options, key, message] of cases) {
      expect(await optionErrorsOf(createField(s.orders, "Computed", type, options))).toEqual([
        { key: `options.${key}`, message },
      ]);
    }
    // The options' own shape: a rollup needs its function; neither may be required.
    expect(
      (
        await optionErrorsOf(
          createField(s.orders, "C", FieldType.ROLLUP, through(s.product.fieldId, s.price.fieldId)),
        )
      ).map((e) => e.key),
    ).toEqual(["options.function"]);
    expect(
      await optionErrorsOf(
        createField(
          s.orders,
          "C",
          FieldType.LOOKUP,
          through(s.product.fieldId, s.name.fieldId),
          true,
        ),
      ),
    ).toEqual([{ key: "required", message: "cannot be true for a read-only type" }]);
    expect(await everything()).toEqual(before);
  });

  it("checks new options of a lookup or rollup as on create", async () => {
    const s = await shop();
    const rollup = await createField(s.orders, "Total", FieldType.ROLLUP, {
      link_field_id: Number(s.product.fieldId),
      field_id: Number(s.price.fieldId),
      function: "sum",
    });
    const before = await everything();
    expect(
      await optionErrorsOf(
        h.catalog.updateField(
          {
            fieldId: rollup.fieldId,
            options: {
              link_field_id: Number(s.product.fieldId),
              field_id: Number(s.name.fieldId),
              function: "sum",
            },
          },
          await as(t.editor),
        ),
      ),
    ).toEqual([
      { key: "options.function", message: "sum needs a number or autonumber field, not text" },
    ]);
    expect(await everything()).toEqual(before);
    const { field } = await h.catalog.updateField(
      {
        fieldId: rollup.fieldId,
        options: {
          link_field_id: Number(s.product.fieldId),
          field_id: Number(s.name.fieldId),
          function: "count_values",
        },
      },
      await as(t.editor),
    );
    expect(field!.options).toMatchObject({
      field_id: Number(s.name.fieldId),
      function: "count_values",
    });
  });

  it("keeps a field a rollup reads to types the rollup's function takes", async () => {
    const s = await shop();
    await createField(s.orders, "Total", FieldType.ROLLUP, {
      link_field_id: Number(s.product.fieldId),
      field_id: Number(s.price.fieldId),
      function: "sum",
    });
    const before = await everything();
    expect(
      await failureOf(
        h.catalog.updateField(
          { fieldId: s.price.fieldId, type: FieldType.TEXT },
          await as(t.editor),
        ),
      ),
    ).toMatchObject({ code: 9, reason: "field_type_change_invalid" });
    expect(await everything()).toEqual(before);
  });

  it("cannot be in a form, nor can links", async () => {
    const s = await shop();
    for (const field of [s.product, s.notes]) {
      expect(
        await reasonOf(
          h.catalog.createForm(
            {
              tableId: field.tableId,
              name: "Form",
              fields: [field.fieldId.toString()],
              required: [],
            },
            await as(t.editor),
          ),
        ),
      ).toBe("form_field_not_allowed");
    }
  });
});

describe("updating a link", () => {
  it("keeps its table and inverse; multiple may change", async () => {
    const a = await newTable();
    const b = await newTable();
    const field = await link(a, "To B", b);
    const inverse = field.options!.inverse_field_id as number;
    const editor = await as(t.editor);
    const update = (options: JsonObject) =>
      h.catalog.updateField({ fieldId: field.fieldId, options }, editor);
    const before = await everything();
    expect(await optionErrorsOf(update({ table_id: Number(a) }))).toEqual([
      { key: "options.table_id", message: "cannot be changed; create a new link field instead" },
    ]);
    expect(
      await optionErrorsOf(update({ table_id: Number(b), inverse_field_id: inverse + 1 })),
    ).toEqual([
      {
        key: "options.inverse_field_id",
        message: "is set by the server: leave it out or send the stored value",
      },
    ]);
    expect(await everything()).toEqual(before);
    const single = await update({ table_id: Number(b), multiple: false });
    expect(single.field!.options).toEqual({
      table_id: Number(b),
      multiple: false,
      inverse_field_id: inverse,
    });
    const back = await update({ table_id: Number(b), multiple: true, inverse_field_id: inverse });
    expect(back.field!.options).toEqual({
      table_id: Number(b),
      multiple: true,
      inverse_field_id: inverse,
    });
  });

  it("refuses type changes into and out of link, lookup and rollup", async () => {
    const a = await newTable();
    const b = await newTable();
    const field = await link(a, "To B", b);
    const text = await createField(a, "Text", FieldType.TEXT);
    const before = await everything();
    for (const [fieldId, type] of [
      [field.fieldId, FieldType.TEXT],
      [field.fieldId, FieldType.LOOKUP],
      [text.fieldId, FieldType.LINK],
      [text.fieldId, FieldType.LOOKUP],
      [text.fieldId, FieldType.ROLLUP],
    ] as const) {
      expect(
        await failureOf(h.catalog.updateField({ fieldId, type }, await as(t.editor))),
      ).toMatchObject({ code: 9, reason: "field_type_change_invalid" });
    }
    expect(await everything()).toEqual(before);
  });
});

describe("deletions", () => {
  /** A links to B; lookups through the link in A and through its inverse in B. */
  async function linked() {
    const a = await newTable();
    const b = await newTable();
    const aText = await createField(a, "A text", FieldType.TEXT);
    const toB = await link(a, "To B", b);
    const bNumber = await createField(b, "B number", FieldType.NUMBER);
    const inverse = await fieldNamed(
      b,
      (await h.catalog.getTable({ tableId: a }, await as(t.viewer))).table!.name,
    );
    const aSees = await createField(a, "Sees B", FieldType.LOOKUP, {
      link_field_id: Number(toB.fieldId),
      field_id: Number(bNumber.fieldId),
    });
    const aSum = await createField(a, "Sum B", FieldType.ROLLUP, {
      link_field_id: Number(toB.fieldId),
      field_id: Number(bNumber.fieldId),
      function: "sum",
    });
    const bSees = await createField(b, "Sees A", FieldType.LOOKUP, {
      link_field_id: Number(inverse.fieldId),
      field_id: Number(aText.fieldId),
    });
    return { a, b, aText, toB, bNumber, inverse, aSees, aSum, bSees };
  }

  async function deletedEvent(fieldId: bigint) {
    return eventOf(h, "catalog.field.deleted", FieldDeletedSchema, (e) => e.fieldId === fieldId);
  }

  it("a link takes its inverse and the lookups and rollups through either along", async () => {
    const s = await linked();
    const versions = [await schemaVersionOf(s.a), await schemaVersionOf(s.b)];
    await h.catalog.deleteField({ fieldId: s.toB.fieldId }, await as(t.editor));
    expect(await namesOf(s.a)).toEqual(["A text"]);
    expect(await namesOf(s.b)).toEqual(["B number"]);
    for (const field of [s.toB, s.inverse, s.aSees, s.aSum, s.bSees]) {
      const event = await deletedEvent(field.fieldId);
      expect(event).toMatchObject({
        organizationId: t.organizationId,
        databaseId,
        tableId: field.tableId,
        type: field.type,
        options: field.options,
      });
      await eventOf(
        h,
        "audit.field.deleted",
        AuditEventSchema,
        (e) => e.target?.id === field.fieldId,
      );
    }
    expect(await schemaVersionOf(s.a)).not.toBe(versions[0]);
    expect(await schemaVersionOf(s.b)).not.toBe(versions[1]);
  });

  it("the inverse takes its link along", async () => {
    const s = await linked();
    await h.catalog.deleteField({ fieldId: s.inverse.fieldId }, await as(t.editor));
    expect(await namesOf(s.a)).toEqual(["A text"]);
    expect(await namesOf(s.b)).toEqual(["B number"]);
  });

  it("a field takes the lookups and rollups that show it, in other tables too", async () => {
    const s = await linked();
    await h.catalog.deleteField({ fieldId: s.bNumber.fieldId }, await as(t.editor));
    expect(await namesOf(s.a)).toEqual(["A text", "To B"]);
    await h.catalog.deleteField({ fieldId: s.aText.fieldId }, await as(t.editor));
    expect(await namesOf(s.b)).toEqual([s.inverse.name]);
    expect(await namesOf(s.a)).toEqual(["To B"]);
    expect((await deletedEvent(s.bSees.fieldId)).tableId).toBe(s.b);
  });

  it("a deleted table takes the links pointing to it along, with what depends on them", async () => {
    const s = await linked();
    const versionA = await schemaVersionOf(s.a);
    await h.catalog.deleteTable({ tableId: s.b }, await as(t.editor));
    expect(await namesOf(s.a)).toEqual(["A text"]);
    for (const field of [s.toB, s.aSees, s.aSum]) {
      expect((await deletedEvent(field.fieldId)).tableId).toBe(s.a);
    }
    await eventOf(h, "catalog.table.deleted", TableDeletedSchema, (e) => e.tableId === s.b);
    // Fields of the deleted table go with it, without events of their own.
    expect(
      eventsOf(h.events, "catalog.field.deleted", FieldDeletedSchema).some(
        (e) => e.fieldId === s.inverse.fieldId,
      ),
    ).toBe(false);
    expect(await schemaVersionOf(s.a)).not.toBe(versionA);
  });

  it("leaves no lookup behind whose field a racing deletion took", async () => {
    const s = await linked();
    for (let round = 0; round < 6; round += 1) {
      const shown = await createField(s.b, `Shown ${round}`, FieldType.TEXT);
      const outcomes = await Promise.allSettled([
        createField(s.a, `Lookup ${round}`, FieldType.LOOKUP, {
          link_field_id: Number(s.toB.fieldId),
          field_id: Number(shown.fieldId),
        }),
        h.catalog.deleteField({ fieldId: shown.fieldId }, await as(t.editor)),
      ]);
      // Either may lose: the lookup to the deletion (its field gone), or either to a deadlock
      // PostgreSQL broke (Unavailable: try again).
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") {
          const failure = await failureOf(Promise.reject(outcome.reason));
          expect([3, 14]).toContain(failure.code);
        }
      }
    }
    const { rows } = await h.db.query(
      `select f.id from catalog.fields f
        where f.type in ('lookup', 'rollup')
          and not exists (select 1 from catalog.fields g
                           where g.id = (f.options->>'field_id')::bigint)`,
    );
    expect(rows).toEqual([]);
  });

  it("a deleted table with a link to itself, or a deleted database, leaves nothing behind", async () => {
    const self = await newTable();
    await link(self, "Self", self);
    const s = await linked();
    await h.catalog.deleteTable({ tableId: self }, await as(t.editor));
    const { database } = await h.catalog.createDatabase(
      { organizationId: t.organizationId, name: "Gone", description: "" },
      await as(t.owner),
    );
    const x = await newTable("X", database!.databaseId);
    const y = await newTable("Y", database!.databaseId);
    await link(x, "Y", y);
    await h.catalog.deleteDatabase({ databaseId: database!.databaseId }, await as(t.owner));
    const { rows } = await h.db.query(
      "select count(*)::int as n from catalog.fields where table_id = any($1::bigint[])",
      [[self, x, y].map(String)],
    );
    expect(rows[0].n).toBe(0);
    expect(await namesOf(s.a)).toHaveLength(4);
  });
});
