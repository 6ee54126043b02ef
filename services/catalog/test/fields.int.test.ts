import type { JsonObject } from "@bufbuild/protobuf";
import { auditChangesOf, errorInfoOf } from "@rowbase/kit";
import { type Field, FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  ChoicesRenamedSchema,
  FieldCreatedSchema,
  FieldDeletedSchema,
  FieldTypeChangedSchema,
  FieldUpdatedSchema,
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
  validationOf,
} from "./harness.js";

let h: Harness;
let t: Team;
let databaseId: bigint;
let tables = 0;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
  const { database } = await h.catalog.createDatabase(
    { organizationId: t.organizationId, name: "Fields", description: "" },
    await as(t.owner),
  );
  databaseId = database!.databaseId;
});

afterAll(async () => {
  await h?.stop();
});

async function newTable(): Promise<bigint> {
  tables += 1;
  const { table } = await h.catalog.createTable(
    { databaseId, name: `Table ${tables}`, description: "", fields: [] },
    await as(t.editor),
  );
  return table!.tableId;
}

async function createField(
  tableId: bigint,
  name: string,
  type: FieldType,
  extra: { options?: JsonObject; required?: boolean; description?: string } = {},
  who = t.editor,
): Promise<Field> {
  const { field } = await h.catalog.createField(
    {
      tableId,
      field: {
        name,
        type,
        options: extra.options,
        required: extra.required ?? false,
        description: extra.description ?? "",
      },
    },
    await as(who),
  );
  return field!;
}

function attempt(tableId: bigint, name: string, type: FieldType, options?: JsonObject) {
  return createField(tableId, name, type, options === undefined ? {} : { options });
}

async function namesInOrder(tableId: bigint): Promise<string[]> {
  const { fields } = await h.catalog.listFields({ tableId }, await as(t.viewer));
  expect(fields.map((f) => f.position)).toEqual(fields.map((_, i) => i));
  return fields.map((f) => f.name);
}

describe("CreateField", () => {
  it("adds the field last, announces and audits it", async () => {
    const tableId = await newTable();
    const first = await createField(tableId, "First", FieldType.TEXT);
    const second = await createField(tableId, " Second ", FieldType.NUMBER, {
      options: { decimals: 2 },
      required: true,
      description: "Amount",
    });
    expect(first).toMatchObject({ position: 0, options: {}, required: false });
    expect(second).toMatchObject({
      tableId,
      name: "Second",
      type: FieldType.NUMBER,
      options: { decimals: 2 },
      required: true,
      description: "Amount",
      position: 1,
    });
    const created = await eventOf(
      h,
      "catalog.field.created",
      FieldCreatedSchema,
      (e) => e.fieldId === second.fieldId,
    );
    expect(created).toMatchObject({
      organizationId: t.organizationId,
      databaseId,
      tableId,
      name: "Second",
      type: FieldType.NUMBER,
      options: { decimals: 2 },
    });
    const audit = await eventOf(
      h,
      "audit.field.created",
      AuditEventSchema,
      (e) => e.target?.id === second.fieldId,
    );
    expect(audit).toMatchObject({ databaseId, tableId, target: { type: "field" } });
    expect(auditChangesOf(audit.changesJson).map((c) => c.key)).toEqual([
      "name",
      "type",
      "options",
      "required",
      "description",
      "position",
    ]);
    expect(auditChangesOf(audit.changesJson)[1]!.new).toBe("number");
  });

  it("refuses a name used in the table regardless of case", async () => {
    const tableId = await newTable();
    await createField(tableId, "Email", FieldType.EMAIL);
    for (const name of ["Email", "email", " EMAIL "]) {
      expect(await failureOf(attempt(tableId, name, FieldType.TEXT))).toMatchObject({
        code: 6,
        reason: "field_name_taken",
      });
    }
    // Another table may use it.
    expect((await createField(await newTable(), "email", FieldType.TEXT)).name).toBe("email");
  });

  it("refuses a name equal under foldName, not only under the database's lower(), writing nothing", async () => {
    const tableId = await newTable();
    await createField(tableId, "İ", FieldType.TEXT);
    await createField(tableId, "Café", FieldType.TEXT);
    const before = await stateOf(h.db, t.organizationId);
    for (const name of ["i\u0307", "I\u0307", "cafe\u0301"]) {
      expect(await failureOf(attempt(tableId, name, FieldType.TEXT))).toMatchObject({
        code: 6,
        reason: "field_name_taken",
      });
    }
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
    // "i" is another name: C.UTF-8's lower("İ") is "i", but records' fold is "i̇".
    await createField(tableId, "i", FieldType.TEXT);
    expect(await reasonOf(attempt(tableId, "I", FieldType.TEXT))).toBe("field_name_taken");
    expect(await namesInOrder(tableId)).toEqual(["İ", "Café", "i"]);
  });

  it("refuses bad names, descriptions and types as validation failures", async () => {
    const tableId = await newTable();
    expect(
      await validationOf(
        h.catalog.createField(
          {
            tableId,
            field: {
              name: "a\nb",
              type: FieldType.TEXT,
              required: false,
              description: "\u0007",
            },
          },
          await as(t.editor),
        ),
      ),
    ).toEqual([
      {
        key: "name",
        message: "must not contain control characters",
        source: "body",
        code: "invalid_value",
      },
      {
        key: "description",
        message: "must not contain control characters other than tabs and line breaks",
        source: "body",
        code: "invalid_value",
      },
    ]);
    expect(await validationOf(attempt(tableId, "Typeless", FieldType.UNSPECIFIED))).toEqual([
      {
        key: "type",
        message: expect.stringMatching(/^must be one of text, /),
        source: "body",
        code: "invalid_value",
      },
    ]);
    expect(await validationOf(attempt(tableId, "Unknown", 99 as FieldType))).toHaveLength(1);
    expect(await validationOf(h.catalog.createField({ tableId }, await as(t.editor)))).toEqual([
      { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
      { key: "type", message: expect.any(String), source: "body", code: "invalid_value" },
    ]);
    // A name no record body could use as a key: refused on create and on rename.
    const reserved = [
      { key: "name", message: 'must not be "__proto__"', source: "body", code: "invalid_value" },
    ];
    expect(await validationOf(attempt(tableId, " __proto__ ", FieldType.TEXT))).toEqual(reserved);
    const field = await createField(tableId, "Fine", FieldType.TEXT);
    expect(
      await validationOf(
        h.catalog.updateField({ fieldId: field.fieldId, name: "__proto__" }, await as(t.editor)),
      ),
    ).toEqual(reserved);
    expect(await namesInOrder(tableId)).toEqual(["Fine"]);
  });

  it("gives a table at most 500 fields, on create and one by one", async () => {
    const defs = (count: number) =>
      Array.from({ length: count }, (_, i) => ({
        name: `F${i}`,
        type: FieldType.NUMBER,
        required: false,
        description: "",
      }));
    const call = await as(t.editor);
    expect(
      await validationOf(
        h.catalog.createTable(
          { databaseId, name: "Too wide", description: "", fields: defs(501) },
          call,
        ),
      ),
    ).toEqual([
      {
        key: "fields",
        message: "must have at most 500 items",
        source: "body",
        code: "too_long",
      },
    ]);
    const { table } = await h.catalog.createTable(
      { databaseId, name: "Wide", description: "", fields: defs(499) },
      call,
    );
    const tableId = table!.tableId;
    const last = await Promise.all(
      ["Last", "Later"].map((name) =>
        createField(tableId, name, FieldType.TEXT).then(
          () => "created",
          (error: unknown) => errorInfoOf(error)?.reason,
        ),
      ),
    );
    expect(last.sort()).toEqual(["created", "field_limit_exceeded"]);
    const { fields } = await h.catalog.listFields({ tableId }, call);
    expect(fields).toHaveLength(500);
  });

  it("lets parallel creates take exactly the last places of 500, and a deleted one's", async () => {
    const call = await as(t.editor);
    const { table } = await h.catalog.createTable(
      {
        databaseId,
        name: "Nearly wide",
        description: "",
        fields: Array.from({ length: 490 }, (_, i) => ({
          name: `F${i}`,
          type: FieldType.NUMBER,
          required: false,
          description: "",
        })),
      },
      call,
    );
    const tableId = table!.tableId;
    const race = (names: string[]) =>
      Promise.all(
        names.map((name) =>
          createField(tableId, name, FieldType.TEXT).then(
            () => "created",
            (error: unknown) => errorInfoOf(error)?.reason,
          ),
        ),
      );
    const first = await race(Array.from({ length: 16 }, (_, i) => `Late ${i}`));
    expect(first.filter((a) => a === "created")).toHaveLength(10);
    expect(first.filter((a) => a === "field_limit_exceeded")).toHaveLength(6);
    const { fields } = await h.catalog.listFields({ tableId }, call);
    expect(fields.map((f) => f.position)).toEqual(Array.from({ length: 500 }, (_, i) => i));

    await h.catalog.deleteField({ fieldId: fields[0]!.fieldId }, call);
    const second = await race(Array.from({ length: 8 }, (_, i) => `Later ${i}`));
    expect(second.filter((a) => a === "created")).toHaveLength(1);
    expect(second.filter((a) => a === "field_limit_exceeded")).toHaveLength(7);
    const after = await h.catalog.listFields({ tableId }, call);
    expect(after.fields.map((f) => f.position)).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });

  it("refuses required on every read-only type", async () => {
    const tableId = await newTable();
    for (const type of [
      FieldType.FILE,
      FieldType.AUTONUMBER,
      FieldType.CREATED_AT,
      FieldType.UPDATED_AT,
    ]) {
      expect(
        await optionErrorsOf(createField(tableId, `RO ${type}`, type, { required: true })),
      ).toEqual([{ key: "required", message: "cannot be true for a read-only type" }]);
    }
    expect(await namesInOrder(tableId)).toEqual([]);
  });

  it("refuses viewers (403), outsiders and missing tables (404), writing nothing", async () => {
    const tableId = await newTable();
    const before = await stateOf(h.db, t.organizationId);
    expect(await failureOf(createField(tableId, "X", FieldType.TEXT, {}, t.viewer))).toMatchObject({
      code: 7,
      reason: "organization_forbidden",
    });
    expect(await reasonOf(createField(tableId, "X", FieldType.TEXT, {}, t.outsider))).toBe(
      "table_not_found",
    );
    expect(await reasonOf(createField(99999999n, "X", FieldType.TEXT, {}, t.owner))).toBe(
      "table_not_found",
    );
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("gives parallel creates distinct consecutive positions", async () => {
    const tableId = await newTable();
    const fields = await Promise.all(
      Array.from({ length: 8 }, (_, i) => createField(tableId, `P${i}`, FieldType.TEXT)),
    );
    expect(fields.map((f) => f.position).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, () => createField(tableId, "Contended", FieldType.TEXT)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results.filter((r) => r.status === "rejected")) {
      expect(await reasonOf(Promise.reject((r as PromiseRejectedResult).reason))).toBe(
        "field_name_taken",
      );
    }
    expect(await namesInOrder(tableId)).toHaveLength(9);
  });
});

describe("options of every type through CreateField", () => {
  let tableId: bigint;
  let n = 0;
  beforeAll(async () => {
    tableId = await newTable();
  });

  const valid: [string, FieldType, JsonObject | undefined, JsonObject][] = [
    ["text", FieldType.TEXT, undefined, {}],
    ["text max_length", FieldType.TEXT, { max_length: 280 }, { max_length: 280 }],
    ["long_text", FieldType.LONG_TEXT, {}, {}],
    ["number", FieldType.NUMBER, undefined, { decimals: 0 }],
    [
      "number bounds",
      FieldType.NUMBER,
      { decimals: 3, min: -10, max: 10.5 },
      { decimals: 3, min: -10, max: 10.5 },
    ],
    ["boolean", FieldType.BOOLEAN, {}, {}],
    ["date", FieldType.DATE, {}, {}],
    ["datetime", FieldType.DATETIME, {}, {}],
    ["single_select empty", FieldType.SINGLE_SELECT, undefined, { choices: [] }],
    ["multi_select", FieldType.MULTI_SELECT, { choices: [] }, { choices: [] }],
    ["email", FieldType.EMAIL, {}, {}],
    ["url", FieldType.URL, {}, {}],
    ["phone", FieldType.PHONE, {}, {}],
    ["json", FieldType.JSON, {}, {}],
    ["file", FieldType.FILE, {}, {}],
    [
      "file limits",
      FieldType.FILE,
      { max_size: 5_000_000, allowed_types: ["image/*", "Application/PDF"] },
      { max_size: 5_000_000, allowed_types: ["image/*", "application/pdf"] },
    ],
    ["autonumber", FieldType.AUTONUMBER, {}, {}],
    ["created_at", FieldType.CREATED_AT, {}, {}],
    ["updated_at", FieldType.UPDATED_AT, {}, {}],
  ];

  it.each(valid)("takes %s options", async (_label, type, options, stored) => {
    n += 1;
    const field = await createField(tableId, `valid ${n}`, type, options ? { options } : {});
    expect(field.options).toEqual(stored);
    const { fields } = await h.catalog.listFields({ tableId }, await as(t.viewer));
    expect(fields.find((f) => f.fieldId === field.fieldId)!.options).toEqual(stored);
  });

  it("gives select choices ids and keeps colours", async () => {
    const field = await createField(tableId, "Colours", FieldType.MULTI_SELECT, {
      options: {
        choices: [
          { name: " Red ", color: "#ff0000" },
          { name: "Blue", color: "blue" },
        ],
      },
    });
    const choices = (field.options as { choices: { id: string }[] }).choices;
    expect(choices).toEqual([
      { id: expect.stringMatching(/^ch_[\w-]{12}$/), name: "Red", color: "#ff0000" },
      { id: expect.stringMatching(/^ch_[\w-]{12}$/), name: "Blue", color: "blue" },
    ]);
    expect(choices[0]!.id).not.toBe(choices[1]!.id);
  });

  const invalid: [string, FieldType, unknown, string[]][] = [
    ["text: unknown key", FieldType.TEXT, { maxLength: 5 }, ["options.maxLength"]],
    ["text: max_length 0", FieldType.TEXT, { max_length: 0 }, ["options.max_length"]],
    ["text: max_length 10001", FieldType.TEXT, { max_length: 10_001 }, ["options.max_length"]],
    ["text: max_length 1.5", FieldType.TEXT, { max_length: 1.5 }, ["options.max_length"]],
    ["text: max_length string", FieldType.TEXT, { max_length: "5" }, ["options.max_length"]],
    ["long_text: any key", FieldType.LONG_TEXT, { max_length: 5 }, ["options.max_length"]],
    ["number: decimals 11", FieldType.NUMBER, { decimals: 11 }, ["options.decimals"]],
    ["number: decimals -1", FieldType.NUMBER, { decimals: -1 }, ["options.decimals"]],
    ["number: min > max", FieldType.NUMBER, { min: 5, max: 1 }, ["options.min"]],
    ["number: min string", FieldType.NUMBER, { min: "1" }, ["options.min"]],
    ["number: max null", FieldType.NUMBER, { max: null }, ["options.max"]],
    [
      "number: several",
      FieldType.NUMBER,
      { decimals: 2.5, precision: 2, format: "x" },
      ["options.decimals", "options.precision", "options.format"],
    ],
    ["boolean: any key", FieldType.BOOLEAN, { default: true }, ["options.default"]],
    ["date: any key", FieldType.DATE, { format: "iso" }, ["options.format"]],
    ["datetime: any key", FieldType.DATETIME, { timezone: "UTC" }, ["options.timezone"]],
    [
      "select: choices not a list",
      FieldType.SINGLE_SELECT,
      { choices: "a,b" },
      ["options.choices"],
    ],
    [
      "select: empty name",
      FieldType.SINGLE_SELECT,
      { choices: [{ name: "  " }] },
      ["options.choices.0.name"],
    ],
    [
      "select: long name",
      FieldType.MULTI_SELECT,
      { choices: [{ name: "x".repeat(101) }] },
      ["options.choices.0.name"],
    ],
    [
      "select: duplicate names",
      FieldType.MULTI_SELECT,
      { choices: [{ name: "Open" }, { name: "OPEN" }] },
      ["options.choices.1.name"],
    ],
    [
      "select: invented id",
      FieldType.SINGLE_SELECT,
      { choices: [{ id: "ch_mine", name: "A" }] },
      ["options.choices.0.id"],
    ],
    [
      "select: bad colour",
      FieldType.SINGLE_SELECT,
      { choices: [{ name: "A", color: "rgb(1,2,3)" }] },
      ["options.choices.0.color"],
    ],
    [
      "select: unknown choice key",
      FieldType.SINGLE_SELECT,
      { choices: [{ name: "A", value: 1 }] },
      ["options.choices.0.value"],
    ],
    ["email: any key", FieldType.EMAIL, { domain: "x" }, ["options.domain"]],
    ["url: any key", FieldType.URL, { https_only: true }, ["options.https_only"]],
    ["phone: any key", FieldType.PHONE, { region: "DE" }, ["options.region"]],
    ["json: any key", FieldType.JSON, { schema: {} }, ["options.schema"]],
    ["file: max_size 0", FieldType.FILE, { max_size: 0 }, ["options.max_size"]],
    ["file: max_size float", FieldType.FILE, { max_size: 1.5 }, ["options.max_size"]],
    ["file: no types", FieldType.FILE, { allowed_types: [] }, ["options.allowed_types"]],
    [
      "file: bad type",
      FieldType.FILE,
      { allowed_types: ["image/png", "png"] },
      ["options.allowed_types.1"],
    ],
    ["autonumber: any key", FieldType.AUTONUMBER, { start: 1 }, ["options.start"]],
    ["created_at: any key", FieldType.CREATED_AT, { format: "x" }, ["options.format"]],
    ["updated_at: any key", FieldType.UPDATED_AT, { format: "x" }, ["options.format"]],
    [
      "__proto__ key",
      FieldType.NUMBER,
      JSON.parse('{"__proto__": {"decimals": 1}}'),
      ["options.__proto__"],
    ],
  ];

  it.each(invalid)("refuses %s", async (_label, type, options, keys) => {
    n += 1;
    const errors = await optionErrorsOf(
      attempt(tableId, `invalid ${n}`, type, options as JsonObject),
    );
    expect(errors.map((e) => e.key)).toEqual(keys);
    for (const error of errors) expect(error.message).toEqual(expect.any(String));
  });

  it("left nothing behind from refused options", async () => {
    const names = await namesInOrder(tableId);
    expect(names.filter((name) => name.startsWith("invalid"))).toEqual([]);
  });
});

describe("a table's schema size", () => {
  /** 1000 distinct choices of 100 characters, most of them 3 bytes in UTF-8. */
  const longChoices = (prefix: string, count = 1000) =>
    Array.from({ length: count }, (_, i) => {
      const start = `${prefix}${i} `;
      return { name: start + "語".repeat(100 - start.length) };
    });
  const bytes = (text: string) => Buffer.byteLength(text);
  /** The measure catalog applies: name, description and options (as JSON) in UTF-8. */
  const sizeOf = (f: { name: string; description: string; options?: JsonObject | undefined }) =>
    bytes(f.name) + bytes(f.description) + bytes(JSON.stringify(f.options ?? {}));
  /** Options as catalog stores them: every choice with an id of 15 characters. */
  const stored = (choices: { name: string }[]) => ({
    choices: choices.map((c) => ({ id: "ch_xxxxxxxxxxxx", name: c.name })),
  });
  const tooLarge = (key: string, total: number) => [
    {
      key,
      message:
        `would make the table's fields hold ${total} bytes of names, descriptions and options ` +
        "(UTF-8, options as JSON); a table holds at most 1048576",
    },
  ];

  it("refuses a select field of more than 1000 choices, writing nothing", async () => {
    const tableId = await newTable();
    const before = await stateOf(h.db, t.organizationId);
    const choices = Array.from({ length: 1001 }, (_, i) => ({ name: `c${i}` }));
    for (const type of [FieldType.SINGLE_SELECT, FieldType.MULTI_SELECT]) {
      expect(await optionErrorsOf(attempt(tableId, "Many", type, { choices }))).toEqual([
        { key: "options.choices", message: "must have at most 1000 choices" },
      ]);
    }
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
    await createField(tableId, "Most", FieldType.MULTI_SELECT, {
      options: { choices: choices.slice(0, 1000) },
    });
  });

  it("refuses a field that takes the table's fields past 1 MiB, writing nothing", async () => {
    const tableId = await newTable();
    for (const prefix of ["a", "b", "c"]) {
      await createField(tableId, `Big ${prefix}`, FieldType.SINGLE_SELECT, {
        options: { choices: longChoices(prefix) },
        description: "語".repeat(1000),
      });
    }
    const { fields } = await h.catalog.listFields({ tableId }, await as(t.viewer));
    const held = fields.reduce((sum, f) => sum + sizeOf(f), 0);
    expect(held).toBeLessThan(1024 * 1024);
    const before = await stateOf(h.db, t.organizationId);
    const fourth = { name: "Big d", description: "", options: stored(longChoices("d")) };
    expect(
      await optionErrorsOf(
        attempt(tableId, "Big d", FieldType.MULTI_SELECT, { choices: longChoices("d") }),
      ),
    ).toEqual(tooLarge("options", held + sizeOf(fourth)));
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
    // What still fits is taken.
    await createField(tableId, "Small", FieldType.TEXT);
    expect(await namesInOrder(tableId)).toEqual(["Big a", "Big b", "Big c", "Small"]);
  });

  it("refuses an update that grows the table's fields past 1 MiB, and takes one that shrinks them", async () => {
    const tableId = await newTable();
    const big = [];
    for (const prefix of ["a", "b", "c"]) {
      big.push(
        await createField(tableId, `Big ${prefix}`, FieldType.MULTI_SELECT, {
          options: { choices: longChoices(prefix) },
        }),
      );
    }
    const small = await createField(tableId, "Small", FieldType.SINGLE_SELECT);
    const { fields } = await h.catalog.listFields({ tableId }, await as(t.viewer));
    const others = fields
      .filter((f) => f.fieldId !== small.fieldId)
      .reduce((sum, f) => sum + sizeOf(f), 0);
    const grown = longChoices("s", 300);
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await optionErrorsOf(
        h.catalog.updateField(
          { fieldId: small.fieldId, options: { choices: grown }, description: "Grown" },
          await as(t.editor),
        ),
      ),
    ).toEqual(
      tooLarge(
        "options",
        others + sizeOf({ name: "Small", description: "Grown", options: stored(grown) }),
      ),
    );
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
    // A change that does not grow the field is taken even now, and one that frees room.
    await h.catalog.updateField(
      { fieldId: big[0]!.fieldId, name: "Big A", options: { choices: longChoices("a", 500) } },
      await as(t.editor),
    );
    const { field } = await h.catalog.updateField(
      { fieldId: small.fieldId, options: { choices: grown }, description: "Grown" },
      await as(t.editor),
    );
    expect(field!.options!.choices).toHaveLength(300);
  });

  it("refuses a new table whose fields hold more than 1 MiB, writing nothing", async () => {
    const before = await stateOf(h.db, t.organizationId);
    const definitions = ["a", "b", "c", "d"].map((prefix) => ({
      name: `Big ${prefix}`,
      type: FieldType.SINGLE_SELECT,
      options: { choices: longChoices(prefix) },
      required: false,
      description: "",
    }));
    const total = definitions.reduce(
      (sum, d) => sum + sizeOf({ ...d, options: stored(d.options.choices) }),
      0,
    );
    expect(
      await optionErrorsOf(
        h.catalog.createTable(
          { databaseId, name: "Too big", description: "", fields: definitions },
          await as(t.editor),
        ),
      ),
    ).toEqual(tooLarge("fields", total));
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });
});

describe("ListFields", () => {
  it("lists in position order to members only", async () => {
    const tableId = await newTable();
    await createField(tableId, "A", FieldType.TEXT);
    await createField(tableId, "B", FieldType.TEXT);
    expect(await namesInOrder(tableId)).toEqual(["A", "B"]);
    expect(await reasonOf(h.catalog.listFields({ tableId }, await as(t.outsider)))).toBe(
      "table_not_found",
    );
    expect(await reasonOf(h.catalog.listFields({ tableId: 99999999n }, await as(t.owner)))).toBe(
      "table_not_found",
    );
  });
});

describe("positions", () => {
  async function tableOf(names: string[]) {
    const tableId = await newTable();
    const ids = new Map<string, bigint>();
    for (const name of names)
      ids.set(name, (await createField(tableId, name, FieldType.TEXT)).fieldId);
    return { tableId, id: (name: string) => ids.get(name)! };
  }

  async function move(fieldId: bigint, position: number) {
    const { field } = await h.catalog.updateField({ fieldId, position }, await as(t.editor));
    return field!;
  }

  it("moves a field forward and back, shifting the others", async () => {
    const { tableId, id } = await tableOf(["A", "B", "C", "D", "E"]);
    expect((await move(id("D"), 1)).position).toBe(1);
    expect(await namesInOrder(tableId)).toEqual(["A", "D", "B", "C", "E"]);
    expect((await move(id("A"), 3)).position).toBe(3);
    expect(await namesInOrder(tableId)).toEqual(["D", "B", "C", "A", "E"]);
    expect((await move(id("E"), 0)).position).toBe(0);
    expect(await namesInOrder(tableId)).toEqual(["E", "D", "B", "C", "A"]);
  });

  it("puts a field last for a position past the end, and changes nothing for its own place", async () => {
    const { tableId, id } = await tableOf(["A", "B", "C"]);
    expect((await move(id("A"), 3)).position).toBe(2);
    expect((await move(id("B"), 2_147_483_647)).position).toBe(2);
    expect(await namesInOrder(tableId)).toEqual(["C", "A", "B"]);
    const outbox = (await stateOf(h.db, t.organizationId)) as { outbox: number };
    expect((await move(id("C"), 0)).position).toBe(0);
    expect(((await stateOf(h.db, t.organizationId)) as { outbox: number }).outbox).toBe(
      outbox.outbox,
    );
  });

  it("changes nothing for the same options in another key order, as stored options come back", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Amount", FieldType.NUMBER, {
      options: { decimals: 2, min: 0, max: 100 },
    });
    const before = await stateOf(h.db, t.organizationId);
    const { field: same } = await h.catalog.updateField(
      { fieldId: field.fieldId, options: { max: 100, min: 0, decimals: 2 } },
      await as(t.editor),
    );
    expect(same?.updatedAt).toEqual(field.updatedAt);
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("refuses a negative position", async () => {
    const { id } = await tableOf(["A"]);
    expect(await validationOf(move(id("A"), -1))).toEqual([
      { key: "position", message: "must be 0 or more", source: "body", code: "out_of_range" },
    ]);
  });

  it("closes the gap when a field is deleted", async () => {
    const { tableId, id } = await tableOf(["A", "B", "C", "D"]);
    await h.catalog.deleteField({ fieldId: id("B") }, await as(t.editor));
    expect(await namesInOrder(tableId)).toEqual(["A", "C", "D"]);
    await h.catalog.deleteField({ fieldId: id("A") }, await as(t.editor));
    expect(await namesInOrder(tableId)).toEqual(["C", "D"]);
    const added = await createField(tableId, "E", FieldType.TEXT);
    expect(added.position).toBe(2);
    expect(await namesInOrder(tableId)).toEqual(["C", "D", "E"]);
  });

  it("keeps positions consistent under parallel moves", async () => {
    const { tableId, id } = await tableOf(["A", "B", "C", "D", "E", "F"]);
    await Promise.all([
      move(id("A"), 5),
      move(id("F"), 0),
      move(id("C"), 1),
      move(id("D"), 9),
      h.catalog.deleteField({ fieldId: id("B") }, await as(t.editor)),
    ]);
    const names = await namesInOrder(tableId);
    expect([...names].sort()).toEqual(["A", "C", "D", "E", "F"]);
  });
});

describe("UpdateField", () => {
  it("renames, describes and requires, with old and new values in the audit", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Title", FieldType.TEXT);
    const { field: updated } = await h.catalog.updateField(
      { fieldId: field.fieldId, name: "Heading", description: "Shown first", required: true },
      await as(t.editor),
    );
    expect(updated).toMatchObject({
      name: "Heading",
      description: "Shown first",
      required: true,
      type: FieldType.TEXT,
      position: 0,
    });
    await eventOf(
      h,
      "catalog.field.updated",
      FieldUpdatedSchema,
      (e) => e.fieldId === field.fieldId,
    );
    const audit = await eventOf(
      h,
      "audit.field.updated",
      AuditEventSchema,
      (e) => e.target?.id === field.fieldId,
    );
    expect(auditChangesOf(audit.changesJson).map((c) => [c.key, c.old, c.new])).toEqual([
      ["name", "Title", "Heading"],
      ["required", false, true],
      ["description", "", "Shown first"],
    ]);
  });

  it("allows changing the case of its own name and refuses another field's name", async () => {
    const tableId = await newTable();
    const a = await createField(tableId, "alpha", FieldType.TEXT);
    await createField(tableId, "Beta", FieldType.TEXT);
    const { field } = await h.catalog.updateField(
      { fieldId: a.fieldId, name: "ALPHA" },
      await as(t.editor),
    );
    expect(field!.name).toBe("ALPHA");
    expect(
      await failureOf(
        h.catalog.updateField({ fieldId: a.fieldId, name: "beta" }, await as(t.editor)),
      ),
    ).toMatchObject({ code: 6, reason: "field_name_taken" });
  });

  it("refuses a rename to another field's name under foldName, changing nothing", async () => {
    const tableId = await newTable();
    await createField(tableId, "İ", FieldType.TEXT);
    const other = await createField(tableId, "Other", FieldType.TEXT);
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await failureOf(
        h.catalog.updateField({ fieldId: other.fieldId, name: "i\u0307" }, await as(t.editor)),
      ),
    ).toMatchObject({ code: 6, reason: "field_name_taken" });
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
    const { field } = await h.catalog.updateField(
      { fieldId: other.fieldId, name: "i" },
      await as(t.editor),
    );
    expect(field!.name).toBe("i");
  });

  it("replaces options as a whole and refuses options that do not fit", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Price", FieldType.NUMBER, {
      options: { decimals: 2, min: 0 },
    });
    const { field: updated } = await h.catalog.updateField(
      { fieldId: field.fieldId, options: { decimals: 4 } },
      await as(t.editor),
    );
    expect(updated!.options).toEqual({ decimals: 4 });
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await optionErrorsOf(
        h.catalog.updateField(
          { fieldId: field.fieldId, options: { decimals: 2, max_length: 3 } },
          await as(t.editor),
        ),
      ),
    ).toEqual([{ key: "options.max_length", message: "is not allowed" }]);
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("refuses required on a read-only field", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Number", FieldType.AUTONUMBER);
    expect(
      await optionErrorsOf(
        h.catalog.updateField({ fieldId: field.fieldId, required: true }, await as(t.editor)),
      ),
    ).toEqual([{ key: "required", message: "cannot be true for a read-only type" }]);
  });

  it("refuses viewers (403), outsiders and missing fields (404), changing nothing", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Guarded", FieldType.TEXT);
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await failureOf(
        h.catalog.updateField({ fieldId: field.fieldId, name: "X" }, await as(t.viewer)),
      ),
    ).toMatchObject({ code: 7, reason: "organization_forbidden" });
    expect(
      await failureOf(
        h.catalog.updateField({ fieldId: field.fieldId, name: "X" }, await as(t.outsider)),
      ),
    ).toMatchObject({ code: 5, reason: "field_not_found" });
    expect(
      await reasonOf(h.catalog.updateField({ fieldId: 99999999n, name: "X" }, await as(t.owner))),
    ).toBe("field_not_found");
    expect(
      await reasonOf(h.catalog.deleteField({ fieldId: field.fieldId }, await as(t.viewer))),
    ).toBe("organization_forbidden");
    expect(
      await reasonOf(h.catalog.deleteField({ fieldId: field.fieldId }, await as(t.outsider))),
    ).toBe("field_not_found");
    expect(await reasonOf(h.catalog.deleteField({ fieldId: 99999999n }, await as(t.owner)))).toBe(
      "field_not_found",
    );
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });
});

describe("type changes", () => {
  it("converts along the table and announces the change with old and new options", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Amount", FieldType.TEXT, {
      options: { max_length: 20 },
    });
    const { field: changed } = await h.catalog.updateField(
      { fieldId: field.fieldId, type: FieldType.NUMBER },
      await as(t.editor),
    );
    expect(changed).toMatchObject({ type: FieldType.NUMBER, options: { decimals: 0 } });
    const event = await eventOf(
      h,
      "catalog.field.type_changed",
      FieldTypeChangedSchema,
      (e) => e.fieldId === field.fieldId,
    );
    expect(event).toMatchObject({
      organizationId: t.organizationId,
      databaseId,
      tableId,
      oldType: FieldType.TEXT,
      newType: FieldType.NUMBER,
      oldOptions: { max_length: 20 },
      newOptions: { decimals: 0 },
      fieldName: "Amount",
    });
    await eventOf(
      h,
      "catalog.field.updated",
      FieldUpdatedSchema,
      (e) => e.fieldId === field.fieldId,
    );
    // A change with options for the new type takes them.
    const { field: back } = await h.catalog.updateField(
      { fieldId: field.fieldId, type: FieldType.TEXT, options: { max_length: 50 } },
      await as(t.editor),
    );
    expect(back).toMatchObject({ type: FieldType.TEXT, options: { max_length: 50 } });
  });

  const allowed: [FieldType, FieldType][] = [
    [FieldType.TEXT, FieldType.BOOLEAN],
    [FieldType.TEXT, FieldType.DATE],
    [FieldType.TEXT, FieldType.SINGLE_SELECT],
    [FieldType.TEXT, FieldType.EMAIL],
    [FieldType.TEXT, FieldType.URL],
    [FieldType.TEXT, FieldType.PHONE],
    [FieldType.NUMBER, FieldType.TEXT],
    [FieldType.JSON, FieldType.LONG_TEXT],
    [FieldType.DATE, FieldType.DATETIME],
    [FieldType.AUTONUMBER, FieldType.NUMBER],
    [FieldType.CREATED_AT, FieldType.DATETIME],
  ];

  it.each(allowed)("allows %s -> %s", async (from, to) => {
    const tableId = await newTable();
    const field = await createField(tableId, "F", from);
    const { field: changed } = await h.catalog.updateField(
      { fieldId: field.fieldId, type: to },
      await as(t.editor),
    );
    expect(changed!.type).toBe(to);
  });

  const refused: [FieldType, FieldType][] = [
    [FieldType.NUMBER, FieldType.BOOLEAN],
    [FieldType.EMAIL, FieldType.URL],
    [FieldType.TEXT, FieldType.FILE],
    [FieldType.TEXT, FieldType.AUTONUMBER],
    [FieldType.DATETIME, FieldType.CREATED_AT],
    [FieldType.FILE, FieldType.TEXT],
    [FieldType.JSON, FieldType.NUMBER],
    [FieldType.SINGLE_SELECT, FieldType.NUMBER],
  ];

  it.each(refused)("refuses %s -> %s without a change", async (from, to) => {
    const tableId = await newTable();
    const field = await createField(tableId, "F", from);
    const before = await stateOf(h.db, t.organizationId);
    expect(
      await failureOf(
        h.catalog.updateField({ fieldId: field.fieldId, type: to, name: "G" }, await as(t.editor)),
      ),
    ).toMatchObject({ code: 9, reason: "field_type_change_invalid" });
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("refuses an unknown type as a validation failure", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "F", FieldType.TEXT);
    expect(
      await validationOf(
        h.catalog.updateField(
          { fieldId: field.fieldId, type: FieldType.UNSPECIFIED },
          await as(t.editor),
        ),
      ),
    ).toEqual([
      { key: "type", message: expect.any(String), source: "body", code: "invalid_value" },
    ]);
  });

  it("keeps a select's choices, ids included, when it becomes the other select", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Tags", FieldType.SINGLE_SELECT, {
      options: { choices: [{ name: "A" }, { name: "B", color: "#00ff00" }] },
    });
    const { field: multi } = await h.catalog.updateField(
      { fieldId: field.fieldId, type: FieldType.MULTI_SELECT },
      await as(t.editor),
    );
    expect(multi!.options).toEqual(field.options);
    // Options sent with the change may keep the ids of the current choices.
    const [a] = (field.options as { choices: { id: string }[] }).choices;
    const { field: single } = await h.catalog.updateField(
      {
        fieldId: field.fieldId,
        type: FieldType.SINGLE_SELECT,
        options: { choices: [{ id: a!.id, name: "A" }] },
      },
      await as(t.editor),
    );
    expect(single!.options).toEqual({ choices: [{ id: a!.id, name: "A" }] });
  });

  it("starts from the new type's defaults when leaving a select", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Choice", FieldType.SINGLE_SELECT, {
      options: { choices: [{ name: "A" }] },
    });
    const { field: text } = await h.catalog.updateField(
      { fieldId: field.fieldId, type: FieldType.TEXT },
      await as(t.editor),
    );
    expect(text!.options).toEqual({});
    // Choice ids of another type are not known to it.
    const options = { choices: [{ id: "ch_invented0000", name: "A" }] };
    expect(
      await optionErrorsOf(
        h.catalog.updateField(
          { fieldId: field.fieldId, type: FieldType.SINGLE_SELECT, options },
          await as(t.editor),
        ),
      ),
    ).toEqual([
      {
        key: "options.choices.0.id",
        message: "is not a choice of this field (leave the id out for a new choice)",
      },
    ]);
  });
});

describe("choice renames", () => {
  it("detects renames by id, swaps included, and announces them together", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Status", FieldType.SINGLE_SELECT, {
      options: { choices: [{ name: "Open" }, { name: "Closed" }, { name: "Stale" }] },
    });
    const [open, closed, stale] = (field.options as { choices: { id: string; name: string }[] })
      .choices;
    const { field: updated } = await h.catalog.updateField(
      {
        fieldId: field.fieldId,
        options: {
          choices: [
            { id: open!.id, name: "Closed" },
            { id: closed!.id, name: "Open" },
            { id: stale!.id, name: "Stale", color: "#999" },
            { name: "New" },
          ],
        },
      },
      await as(t.editor),
    );
    const choices = (updated!.options as { choices: { id: string; name: string }[] }).choices;
    expect(choices.map((c) => [c.id, c.name])).toEqual([
      [open!.id, "Closed"],
      [closed!.id, "Open"],
      [stale!.id, "Stale"],
      [expect.stringMatching(/^ch_/), "New"],
    ]);
    const renamed = await eventOf(
      h,
      "catalog.field.choices_renamed",
      ChoicesRenamedSchema,
      (e) => e.fieldId === field.fieldId,
    );
    expect(renamed).toMatchObject({ organizationId: t.organizationId, databaseId, tableId });
    expect(renamed.renames.map((r) => [r.choiceId, r.oldName, r.newName])).toEqual([
      [open!.id, "Open", "Closed"],
      [closed!.id, "Closed", "Open"],
    ]);
    const audit = await eventOf(
      h,
      "audit.field.updated",
      AuditEventSchema,
      (e) => e.target?.id === field.fieldId,
    );
    expect(auditChangesOf(audit.changesJson).map((c) => c.key)).toEqual(["options"]);
  });

  it("announces no rename when names stay, but the new choices, which end records' check", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Labels", FieldType.MULTI_SELECT, {
      options: { choices: [{ name: "x" }, { name: "y" }] },
    });
    const [x] = (field.options as { choices: { id: string }[] }).choices;
    const { field: updated } = await h.catalog.updateField(
      { fieldId: field.fieldId, options: { choices: [{ id: x!.id, name: "x" }, { name: "z" }] } },
      await as(t.editor),
    );
    // ChoicesRenamed follows FieldUpdated out of the outbox: waiting for the first does not
    // mean the second has been received.
    await eventOf(
      h,
      "catalog.field.choices_renamed",
      ChoicesRenamedSchema,
      (e) => e.fieldId === field.fieldId,
    );
    const announced = eventsOf(
      h.events,
      "catalog.field.choices_renamed",
      ChoicesRenamedSchema,
    ).filter((e) => e.fieldId === field.fieldId);
    expect(
      announced.map((e) => ({ renames: e.renames, type: e.type, options: e.options })),
    ).toEqual([{ renames: [], type: FieldType.MULTI_SELECT, options: updated!.options }]);
  });

  it("keeps ids when a client resends the choices by name alone: nothing changes", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Phase", FieldType.SINGLE_SELECT, {
      options: { choices: [{ name: "Plan" }, { name: "Build", color: "#123456" }] },
    });
    const before = await stateOf(h.db, t.organizationId);
    const { field: same } = await h.catalog.updateField(
      {
        fieldId: field.fieldId,
        options: { choices: [{ name: "Plan" }, { name: "Build", color: "#123456" }] },
      },
      await as(t.editor),
    );
    expect(same!.options).toEqual(field.options);
    expect(await stateOf(h.db, t.organizationId)).toEqual(before);
  });

  it("refuses duplicate names after a rename and ids of other fields", async () => {
    const tableId = await newTable();
    const first = await createField(tableId, "One", FieldType.SINGLE_SELECT, {
      options: { choices: [{ name: "A" }, { name: "B" }] },
    });
    const other = await createField(tableId, "Two", FieldType.SINGLE_SELECT, {
      options: { choices: [{ name: "C" }] },
    });
    const [a, b] = (first.options as { choices: { id: string }[] }).choices;
    const [c] = (other.options as { choices: { id: string }[] }).choices;
    expect(
      await optionErrorsOf(
        h.catalog.updateField(
          {
            fieldId: first.fieldId,
            options: {
              choices: [
                { id: a!.id, name: "b" },
                { id: b!.id, name: "B" },
              ],
            },
          },
          await as(t.editor),
        ),
      ),
    ).toEqual([
      {
        key: "options.choices.1.name",
        message: "duplicates choice 0 (names are unique regardless of case)",
      },
    ]);
    expect(
      (
        await optionErrorsOf(
          h.catalog.updateField(
            { fieldId: first.fieldId, options: { choices: [{ id: c!.id, name: "C" }] } },
            await as(t.editor),
          ),
        )
      ).map((e) => e.key),
    ).toEqual(["options.choices.0.id"]);
  });
});

describe("DeleteField", () => {
  it("deletes the field, announces it with its type and audits it", async () => {
    const tableId = await newTable();
    const field = await createField(tableId, "Attachment", FieldType.FILE, {
      options: { max_size: 1024 },
    });
    expect(await h.catalog.deleteField({ fieldId: field.fieldId }, await as(t.editor))).toEqual(
      expect.objectContaining({}),
    );
    expect(await namesInOrder(tableId)).toEqual([]);
    const event = await eventOf(
      h,
      "catalog.field.deleted",
      FieldDeletedSchema,
      (e) => e.fieldId === field.fieldId,
    );
    expect(event).toMatchObject({
      organizationId: t.organizationId,
      databaseId,
      tableId,
      type: FieldType.FILE,
      options: { max_size: 1024 },
    });
    await eventOf(
      h,
      "audit.field.deleted",
      AuditEventSchema,
      (e) => e.target?.id === field.fieldId,
    );
    expect(
      await reasonOf(h.catalog.deleteField({ fieldId: field.fieldId }, await as(t.editor))),
    ).toBe("field_not_found");
    // The name is free again.
    expect((await createField(tableId, "attachment", FieldType.TEXT)).position).toBe(0);
  });
});
