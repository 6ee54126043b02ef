import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  FieldSchema as FieldMessage,
  FieldType,
} from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import {
  CreateFieldRequestSchema,
  CreateFieldResponseSchema,
} from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { describe, expect, it } from "vitest";
import { FIELD_TYPES, fieldTypeValue } from "../../presentation/field-types.js";
import { fieldDefinitionOf, presentField } from "./field-presenters.js";
import { FieldCreateSchema, FieldSchema } from "./field-schemas.js";

const created = new Date("2026-11-21T10:15:00.123Z");
const updated = new Date("2026-11-22T08:00:00Z");

const options = {
  choices: [
    { id: "c1", name: "Open", color: "green" },
    { id: "c2", name: "Done", color: null },
  ],
  decimals: 2,
  min: -0.5,
  max: 1e21,
  allow_empty: false,
  nested: { list: [1, "two", [true, null], {}] },
};

/** A message as it arrives: encoded by the service, decoded by the gateway's client. */
function overTheWire(init: Parameters<typeof create<typeof FieldMessage>>[1]) {
  const response = create(CreateFieldResponseSchema, { field: create(FieldMessage, init) });
  return fromBinary(CreateFieldResponseSchema, toBinary(CreateFieldResponseSchema, response)).field;
}

describe("presentField", () => {
  it("writes the Field shape, options carried as a Struct coming back as plain JSON", () => {
    const field = presentField(
      overTheWire({
        fieldId: 31n,
        tableId: 7n,
        name: "Stage",
        type: FieldType.SINGLE_SELECT,
        options,
        required: true,
        description: "Sales stage",
        position: 2,
        createdAt: timestampFromDate(created),
        updatedAt: timestampFromDate(updated),
      }),
    );
    expect(field).toEqual({
      field_id: 31,
      table_id: 7,
      name: "Stage",
      type: "single_select",
      options,
      required: true,
      description: "Sales stage",
      position: 2,
      created_at: "2026-11-21T10:15:00.123Z",
      updated_at: "2026-11-22T08:00:00.000Z",
    });
    expect(FieldSchema.parse(field)).toEqual(field);
  });

  it("writes every type by its wire name, and unset options as an empty object", () => {
    for (const type of FIELD_TYPES) {
      const field = presentField(
        overTheWire({
          fieldId: 1n,
          tableId: 1n,
          name: "f",
          type: fieldTypeValue(type),
          createdAt: timestampFromDate(created),
          updatedAt: timestampFromDate(created),
        }),
      );
      expect(field).toMatchObject({
        type,
        options: {},
        required: false,
        description: "",
        position: 0,
      });
    }
  });

  it("refuses an answer that breaks the contract rather than guess (500)", () => {
    const valid = {
      fieldId: 1n,
      tableId: 1n,
      name: "f",
      type: FieldType.TEXT,
      createdAt: timestampFromDate(created),
      updatedAt: timestampFromDate(created),
    };
    expect(() => presentField(undefined)).toThrow(/field is missing/);
    expect(() =>
      presentField(create(FieldMessage, { ...valid, type: FieldType.UNSPECIFIED })),
    ).toThrow(/field type 0/);
    expect(() => presentField(create(FieldMessage, { ...valid, createdAt: undefined }))).toThrow(
      /timestamp/,
    );
    expect(() => presentField(create(FieldMessage, { ...valid, tableId: 2n ** 53n }))).toThrow(
      /JSON number/,
    );
  });
});

describe("fieldDefinitionOf", () => {
  it("sends a validated FieldCreate as the FieldDefinition, options intact over the wire", () => {
    const body = FieldCreateSchema.parse({
      name: "Stage",
      type: "multi_select",
      options,
      required: true,
      description: "Where the lead is",
    });
    const request = create(CreateFieldRequestSchema, {
      tableId: 7n,
      field: fieldDefinitionOf(body),
    });
    const received = fromBinary(
      CreateFieldRequestSchema,
      toBinary(CreateFieldRequestSchema, request),
    );
    expect(received.tableId).toBe(7n);
    expect(received.field).toMatchObject({
      name: "Stage",
      type: FieldType.MULTI_SELECT,
      required: true,
      description: "Where the lead is",
    });
    expect(received.field?.options).toEqual(options);
  });

  it("leaves options unset when left out (the type's defaults) and fills the other defaults", () => {
    const received = fromBinary(
      CreateFieldRequestSchema,
      toBinary(
        CreateFieldRequestSchema,
        create(CreateFieldRequestSchema, {
          tableId: 1n,
          field: fieldDefinitionOf(FieldCreateSchema.parse({ name: "Notes", type: "long_text" })),
        }),
      ),
    );
    expect(received.field?.options).toBeUndefined();
    expect(received.field).toMatchObject({
      name: "Notes",
      type: FieldType.LONG_TEXT,
      required: false,
      description: "",
    });
    // An empty object is sent as one: "no options" rather than "defaults".
    const empty = fieldDefinitionOf(
      FieldCreateSchema.parse({ name: "n", type: "number", options: {} }),
    );
    expect(empty.options).toEqual({});
  });
});
