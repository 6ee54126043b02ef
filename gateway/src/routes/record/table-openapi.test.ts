import { create, type JsonObject } from "@bufbuild/protobuf";
import { RECORD_BATCH_MAX } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { TableRecordSchemaSchema } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { VALIDATION_ITEMS_MAX } from "../../errors/validation-failed.js";
import { buildOpenApiDocument } from "../../routing/openapi.js";
import { recordRoutes } from "./record-routes.js";
import { tableOpenApi } from "./table-openapi.js";

type Json = Record<string, unknown>;
interface Document {
  info: Json;
  servers?: Json[];
  paths: Record<string, Record<string, Json>>;
  components: { schemas: Record<string, Json> };
}

// Building the routes calls no service: the document is rendered from what is passed in.
const routes = recordRoutes({ records: {} as never, quota: {} as never, publicBaseUrl: "" });
const api = buildOpenApiDocument(routes, {
  serverUrl: "https://api.example.com",
}) as unknown as Document;

const data = (key: string): JsonObject => ({
  type: "object",
  properties: { [key]: { type: ["string", "null"], examples: ["Ada"] } },
  additionalProperties: false,
});
/** The same with the example record the document adds. */
const withExample = (schema: JsonObject, key: string): JsonObject => ({
  ...schema,
  examples: [{ [key]: "Ada" }],
});
const schema = create(TableRecordSchemaSchema, {
  tableName: "Customers",
  fields: [
    { fieldId: 11n, name: "Name", type: FieldType.TEXT, sortable: true },
    { fieldId: 12n, name: "Meta", type: FieldType.JSON, sortable: false },
  ],
  readById: data("11"),
  readByName: data("Name"),
  createByName: { ...data("Name"), required: ["Name"] },
  createById: { ...data("11"), required: ["11"] },
  updateByName: data("Name"),
  updateById: data("11"),
});
const table = { tableId: 42n, databaseId: 7n };
const document = tableOpenApi(
  schema,
  table,
  routes,
  "https://api.example.com",
) as unknown as Document;
const byNames = tableOpenApi(
  schema,
  table,
  routes,
  "https://api.example.com",
  "names",
) as unknown as Document;
const V1 = "/public/v1/databases/{database_id}/tables/{table_id}";

/** The schema of an operation's success answer's `data`. */
const answerOf = (doc: Document, path: string, method: string) => {
  const ok = (doc.paths[path]![method]!.responses as Record<string, Json>)["200"]!;
  const content = ok.content as Record<string, { schema: { properties: { data: Json } } }>;
  return content["application/json"]!.schema.properties.data;
};

/** `METHOD /path/{param}` of every operation of a document. */
const operationsOf = (doc: Document, only: (path: string) => boolean = () => true) =>
  Object.entries(doc.paths)
    .filter(([path]) => only(path))
    .flatMap(([path, item]) =>
      Object.keys(item)
        .filter((key) => key !== "parameters")
        .map((method) => `${method.toUpperCase()} ${path}`),
    )
    .sort();

const errorsOf = (operation: Json) =>
  Object.fromEntries(
    Object.entries(operation.responses as Record<string, Json>).filter(
      ([status]) => status >= "400",
    ),
  );

describe("a table's OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document, in both forms", async () => {
    for (const doc of [document, byNames]) {
      const result = await new Validator().validate(structuredClone(doc) as never);
      expect(result.errors).toBeUndefined();
    }
  });

  it("documents exactly the record routes the gateway serves", () => {
    expect(operationsOf(document)).toEqual(
      operationsOf(api, (path) => path.startsWith("/public/")),
    );
  });

  it("gives each operation the errors /openapi.json gives its route, and the same envelopes", () => {
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (method === "parameters") continue;
        expect(errorsOf(operation), `${method} ${path}`).toEqual(
          errorsOf(api.paths[path]![method]!),
        );
      }
    }
    for (const name of ["ValidationError", "InternalError"]) {
      expect(document.components.schemas[name]).toEqual(api.components.schemas[name]);
    }
    const extra = (document.components.schemas.ValidationError!.properties as Record<string, Json>)
      .extra!;
    expect(extra.maxItems).toBe(VALIDATION_ITEMS_MAX);
    const tooMany = document.paths["/public/record/list"]!.get!.responses as Record<string, Json>;
    expect(tooMany["429"]!.headers).toHaveProperty("Retry-After");
  });

  it("takes 1-1000 records in each batch, as the routes do", () => {
    const v1 = "/public/v1/databases/{database_id}/tables/{table_id}";
    const bodyOf = (path: string, method: string) => {
      const content = (api.paths[path]![method]!.requestBody as Json).content as Record<
        string,
        { schema: Json }
      >;
      return content["application/json"]!.schema;
    };
    const arrayOf = (doc: Document, path: string, method: string, key: string) => {
      const body = (doc.paths[path]![method]!.requestBody as Json).content as Record<
        string,
        { schema: { properties: Record<string, Json> } }
      >;
      return body["application/json"]!.schema.properties[key]!;
    };
    for (const [path, method, key] of [
      [`${v1}/records/batch`, "post", "records"],
      [`${v1}/records/batch`, "patch", "records"],
      [`${v1}/records/batch_delete`, "post", "row_ids"],
    ] as const) {
      expect(arrayOf(document, path, method, key)).toMatchObject({
        minItems: 1,
        maxItems: RECORD_BATCH_MAX,
      });
      // The gateway's own document names the body schema; its array has the same bounds.
      const named = (bodyOf(path, method).$ref as string).split("/").at(-1)!;
      const properties = api.components.schemas[named]!.properties as Record<string, Json>;
      expect(properties[key]).toMatchObject({ minItems: 1, maxItems: RECORD_BATCH_MAX });
    }
  });

  it("carries the records service's data schemas and pins the table's ids", () => {
    const schemas = document.components.schemas;
    expect(schemas.RecordData).toEqual(withExample(data("11"), "11"));
    expect(schemas.RecordCreateData).toEqual(
      withExample({ ...data("11"), required: ["11"] }, "11"),
    );
    expect(schemas.RecordUpdateData).toEqual(withExample(data("11"), "11"));
    expect(schemas).not.toHaveProperty("RecordDataByName");
    const named = byNames.components.schemas;
    expect(named.RecordData).toEqual(withExample(data("11"), "11"));
    expect(named.RecordDataByName).toEqual(withExample(data("Name"), "Name"));
    expect(named.RecordCreateData).toEqual(
      withExample({ ...data("Name"), required: ["Name"] }, "Name"),
    );
    expect(named.RecordUpdateData).toEqual(withExample(data("Name"), "Name"));
    const pinned = document.paths["/public/v1/databases/{database_id}/tables/{table_id}/records"]!
      .parameters as unknown as { name: string; schema: Json }[];
    expect(pinned.map((p) => [p.name, p.schema.enum])).toEqual([
      ["database_id", [7]],
      ["table_id", [42]],
    ]);
    expect(document.info.title).toBe("Rowbase table Customers");
    expect(document.info.description).toContain("Name (text, id 11), Meta (json, id 12)");
    expect(document.servers).toEqual([{ url: "https://api.example.com" }]);
  });

  it("keys each answer one way: reads as the document's form says, writes by id", () => {
    const record = (ref: string) => ({ record: { $ref: `#/components/schemas/${ref}` } });
    for (const [doc, read] of [
      [document, "Record"],
      [byNames, "RecordByName"],
    ] as const) {
      expect(answerOf(doc, `${V1}/records/{row_id}`, "get").properties).toEqual(record(read));
      expect(answerOf(doc, "/public/record/get", "get").properties).toEqual(record(read));
      expect((answerOf(doc, `${V1}/records`, "get").properties as Json).records).toEqual({
        type: "array",
        items: { $ref: `#/components/schemas/${read}` },
      });
      for (const [path, method] of [
        [`${V1}/records`, "post"],
        [`${V1}/records/{row_id}`, "patch"],
        ["/public/record/create", "post"],
        ["/public/record/update", "put"],
      ]) {
        expect(answerOf(doc, path!, method!).properties, `${method} ${path}`).toEqual(
          record("Record"),
        );
      }
      const get = doc.paths[`${V1}/records/{row_id}`]!.get!.parameters as Json[];
      const format = get.find((p) => p.name === "response_format")!;
      expect(format.schema).toMatchObject({
        enum: [doc === byNames ? "names" : "ids"],
      });
      expect(format.required ?? false).toBe(doc === byNames);
    }
  });

  it("changes its version when the table's schema changes", () => {
    const renamed = create(TableRecordSchemaSchema, { ...schema, tableName: "Clients" });
    const version = (s: typeof schema) =>
      (tableOpenApi(s, table, routes, "") as unknown as Document).info.version;
    expect(version(schema)).toMatch(/^1\.0\.0\+[0-9a-f]{12}$/);
    expect(version(schema)).toBe(byNames.info.version);
    expect(version(renamed)).not.toBe(version(schema));
  });

  it("offers only the sortable fields to sort by", () => {
    const list = document.paths["/public/record/list"]!.get!.parameters as {
      name: string;
      description?: string;
    }[];
    const sort = list.find((p) => p.name === "sort")!;
    expect(sort.description).toContain("Sortable: Name, row_id, created_at, updated_at.");
  });
});
