import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { itemsFromIssues, type ValidationSource } from "../../errors/validation-failed.js";
import {
  PublicBatchCreateBody,
  PublicBatchDeleteBody,
  PublicBatchUpdateBody,
  PublicCreateBody,
  PublicGetQuery,
  PublicListQuery,
  PublicRowQuery,
  PublicTableQuery,
  PublicUpdateBody,
  RecordPath,
  V1GetQuery,
  V1ListQuery,
} from "./record-schemas.js";

function parse(schema: z.ZodType, value: unknown, source: ValidationSource) {
  const result = schema.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true as const, value: result.data }
    : { ok: false as const, items: itemsFromIssues(result.error.issues, source) };
}

const refused = (source: ValidationSource, ...items: [string, string][]) => ({
  ok: false,
  // The codes are checked with the zod issues they come from (errors/validation-failed.test.ts).
  items: items.map(([key, message]) => ({ key, message, source, code: expect.any(String) })),
});

const ID_MESSAGE = "must be an integer between 1 and 9007199254740991";

describe("list parameters", () => {
  it("default to the first 50 records, ids, every field, no filter, row_id order", () => {
    expect(parse(V1ListQuery, {}, "query")).toEqual({
      ok: true,
      value: {
        limit: 50,
        offset: 0,
        count: "exact",
        response_format: "ids",
        where: "",
        fields: "",
        sort: "",
      },
    });
  });

  it("read count as exact, estimated or none, and nothing else", () => {
    for (const count of ["exact", "estimated", "none"]) {
      expect(parse(V1ListQuery, { count }, "query")).toMatchObject({ ok: true, value: { count } });
    }
    expect(parse(V1ListQuery, { count: "fast" }, "query")).toMatchObject({
      ok: false,
      items: [{ key: "count", source: "query" }],
    });
  });

  it("read every parameter, sort and fields as the client wrote them", () => {
    expect(
      parse(
        V1ListQuery,
        {
          limit: "1000",
          offset: "10000000",
          count: "none",
          response_format: "names",
          rich_text: "html",
          where: "(Status,eq,Active)~and((Age,gte,18)~or(Vip,checked))",
          fields: 'Name,"Size, net",12',
          sort: "-Age,Name",
        },
        "query",
      ),
    ).toEqual({
      ok: true,
      value: {
        limit: 1000,
        offset: 10_000_000,
        count: "none",
        response_format: "names",
        rich_text: "html",
        where: "(Status,eq,Active)~and((Age,gte,18)~or(Vip,checked))",
        fields: 'Name,"Size, net",12',
        sort: "-Age,Name",
      },
    });
  });

  it("treat an empty where, sort or fields as absent", () => {
    expect(parse(V1ListQuery, { where: "", sort: "", fields: "" }, "query")).toMatchObject({
      ok: true,
      value: { where: "", sort: "", fields: "" },
    });
  });

  it("refuse limits outside 1-1000 and anything but plain digits", () => {
    for (const limit of ["0", "1001", "-1", "1.5", "1e3", " 5", "", "0x10", "99999999999"]) {
      expect({ limit, result: parse(V1ListQuery, { limit }, "query") }).toEqual({
        limit,
        result: refused("query", ["limit", "must be an integer between 1 and 1000"]),
      });
    }
  });

  it("refuse a negative or huge offset", () => {
    for (const offset of ["-1", "10000001", "abc"]) {
      expect(parse(V1ListQuery, { offset }, "query")).toEqual(
        refused("query", ["offset", "must be an integer between 0 and 10000000"]),
      );
    }
  });

  it("refuse unknown formats and a repeated parameter", () => {
    expect(parse(V1ListQuery, { response_format: "IDS", rich_text: "markdown2" }, "query")).toEqual(
      refused(
        "query",
        ["response_format", "must be one of ids, names"],
        ["rich_text", "must be one of markdown, html, plain"],
      ),
    );
    expect(parse(V1ListQuery, { limit: ["5", "6"], where: ["a", "b"] }, "query")).toEqual(
      refused("query", ["limit", "must be given once"], ["where", "must be given once"]),
    );
  });

  it("count where in characters, up to 4096, as the records service does", () => {
    expect(parse(V1ListQuery, { where: "x".repeat(4096) }, "query").ok).toBe(true);
    expect(parse(V1ListQuery, { where: "😀".repeat(4096) }, "query").ok).toBe(true);
    expect(parse(V1ListQuery, { where: "x".repeat(4097) }, "query")).toEqual(
      refused("query", ["where", "must be at most 4096 characters"]),
    );
    expect(parse(V1ListQuery, { where: "😀".repeat(5000) }, "query")).toEqual(
      refused("query", ["where", "must be at most 4096 characters"]),
    );
  });

  it("take no other parameter; credentials are refused earlier, by the middleware", () => {
    expect(parse(V1ListQuery, { page: "2", filter: "x" }, "query")).toEqual(
      refused("query", ["page", "is not allowed"], ["filter", "is not allowed"]),
    );
  });
});

describe("single-record reads", () => {
  it("take the format options and fields only", () => {
    expect(parse(V1GetQuery, { fields: "A", rich_text: "plain" }, "query")).toEqual({
      ok: true,
      value: { response_format: "ids", rich_text: "plain", fields: "A" },
    });
    expect(parse(V1GetQuery, { limit: "5" }, "query")).toEqual(
      refused("query", ["limit", "is not allowed"]),
    );
  });
});

describe("query-form parameters", () => {
  it("list needs database_id and table_id", () => {
    expect(parse(PublicListQuery, {}, "query")).toEqual(
      refused("query", ["database_id", "is required"], ["table_id", "is required"]),
    );
    expect(parse(PublicListQuery, { database_id: "1", table_id: "2" }, "query")).toMatchObject({
      ok: true,
      value: { database_id: 1n, table_id: 2n, limit: 50 },
    });
  });

  it("get needs table_id and row_id; database_id is optional", () => {
    expect(parse(PublicGetQuery, { table_id: "2", row_id: "3" }, "query")).toEqual({
      ok: true,
      value: { table_id: 2n, row_id: 3n, response_format: "ids", fields: "" },
    });
    expect(
      parse(PublicGetQuery, { table_id: "2", row_id: "3", database_id: "1" }, "query"),
    ).toMatchObject({ ok: true, value: { database_id: 1n } });
    expect(parse(PublicGetQuery, { table_id: "2", row_id: "0" }, "query")).toEqual(
      refused("query", ["row_id", ID_MESSAGE]),
    );
  });

  it("create takes table_id only; update and delete take table_id and row_id", () => {
    expect(parse(PublicTableQuery, { table_id: "2" }, "query")).toEqual({
      ok: true,
      value: { table_id: 2n },
    });
    expect(parse(PublicTableQuery, { table_id: "2", database_id: "1" }, "query")).toEqual(
      refused("query", ["database_id", "is not allowed"]),
    );
    expect(parse(PublicRowQuery, { table_id: "2" }, "query")).toEqual(
      refused("query", ["row_id", "is required"]),
    );
  });
});

describe("v1 path parameters", () => {
  it("are positive integer ids", () => {
    expect(parse(RecordPath, { database_id: "1", table_id: "2", row_id: "3" }, "path")).toEqual({
      ok: true,
      value: { database_id: 1n, table_id: 2n, row_id: 3n },
    });
    expect(parse(RecordPath, { database_id: "x", table_id: "0", row_id: "3" }, "path")).toEqual(
      refused("path", ["database_id", ID_MESSAGE], ["table_id", ID_MESSAGE]),
    );
  });
});

describe("record bodies", () => {
  it("take data as an object of values, by id or name", () => {
    const data = { "12": "x", Name: null, Tags: ["a"], Meta: { deep: [1, 2] } };
    expect(parse(PublicCreateBody, { data }, "body")).toEqual({ ok: true, value: { data } });
    expect(parse(PublicCreateBody, { data: {} }, "body")).toEqual({
      ok: true,
      value: { data: {} },
    });
  });

  it("refuse a missing or non-object data, unknown keys and values a Struct cannot carry", () => {
    expect(parse(PublicCreateBody, {}, "body")).toEqual(refused("body", ["data", "is required"]));
    expect(parse(PublicCreateBody, { data: [1] }, "body")).toEqual(
      refused("body", ["data", "must be a JSON object"]),
    );
    expect(parse(PublicCreateBody, { data: {}, row_id: 1 }, "body")).toEqual(
      refused("body", ["row_id", "is not allowed"]),
    );
    // Keyed by the reference as sent, as the records service keys other bad values.
    expect(parse(PublicCreateBody, { data: { n: Number.POSITIVE_INFINITY } }, "body")).toEqual(
      refused("body", ["n", "must be a finite number"]),
    );
    expect(parse(PublicUpdateBody, { data: { j: { a: { b: 1 / 0 } } } }, "body")).toEqual(
      refused("body", ["j", "must be a finite number"]),
    );
  });

  it("name every value refused here, one item per reference, and the body's other bad keys", () => {
    const finite = "must be a finite number";
    // JSON.parse reads an out-of-range number as Infinity; `j` holds two, one item says it.
    const data = '{"a": 1e400, "ok": 1, "b": -1e400, "j": {"x": 1e400, "y": [1e400]}}';
    for (const schema of [PublicCreateBody, PublicUpdateBody]) {
      expect(parse(schema, JSON.parse(`{"data": ${data}, "row_id": 1}`), "body")).toEqual(
        refused("body", ["a", finite], ["b", finite], ["j", finite], ["row_id", "is not allowed"]),
      );
    }
    expect(
      parse(
        PublicBatchCreateBody,
        JSON.parse(`{"records": [{"data": ${data}}, {"data": {}, "x": 1}], "y": 2}`),
        "body",
      ),
    ).toEqual(
      refused(
        "body",
        ["records.0.data.a", finite],
        ["records.0.data.b", finite],
        ["records.0.data.j", finite],
        ["records.1.x", "is not allowed"],
        ["y", "is not allowed"],
      ),
    );
  });

  it("take 1-1000 records in a batch create", () => {
    const records = Array.from({ length: 1000 }, (_, i) => ({ data: { n: i } }));
    expect(parse(PublicBatchCreateBody, { records }, "body").ok).toBe(true);
    expect(parse(PublicBatchCreateBody, { records: [...records, { data: {} }] }, "body")).toEqual(
      refused("body", ["records", "must have 1-1000 items"]),
    );
    expect(parse(PublicBatchCreateBody, { records: [] }, "body")).toEqual(
      refused("body", ["records", "must have 1-1000 items"]),
    );
    expect(
      parse(PublicBatchCreateBody, { records: [{ data: {} }, { data: 1 }, { x: 1 }] }, "body"),
    ).toEqual(
      refused(
        "body",
        ["records.1.data", "must be a JSON object"],
        ["records.2.data", "is required"],
        ["records.2.x", "is not allowed"],
      ),
    );
    // Keyed `records.N.data.<reference>` as the records service keys every other bad value
    // of a batch, not by the path inside the value.
    expect(
      parse(PublicBatchCreateBody, { records: [{ data: { j: { a: [1 / 0] } } }] }, "body"),
    ).toEqual(refused("body", ["records.0.data.j", "must be a finite number"]));
    expect(
      parse(
        PublicBatchUpdateBody,
        {
          records: [
            { row_id: 1, data: {} },
            { row_id: 2, data: { j: [[-1 / 0]] } },
          ],
        },
        "body",
      ),
    ).toEqual(refused("body", ["records.1.data.j", "must be a finite number"]));
  });

  it("take row ids and changes in a batch update", () => {
    expect(
      parse(PublicBatchUpdateBody, { records: [{ row_id: 7, data: { a: 1 } }] }, "body"),
    ).toEqual({ ok: true, value: { records: [{ row_id: 7n, data: { a: 1 } }] } });
    expect(parse(PublicBatchUpdateBody, { records: [{ row_id: 0, data: {} }] }, "body")).toEqual(
      refused("body", ["records.0.row_id", ID_MESSAGE]),
    );
    expect(parse(PublicBatchUpdateBody, { records: [{ data: {} }] }, "body")).toEqual(
      refused("body", ["records.0.row_id", "is required"]),
    );
  });

  it("take 1-1000 positive row ids in a batch delete", () => {
    expect(parse(PublicBatchDeleteBody, { row_ids: [1, 2, 3] }, "body")).toEqual({
      ok: true,
      value: { row_ids: [1n, 2n, 3n] },
    });
    expect(parse(PublicBatchDeleteBody, { row_ids: [1, "2", -3] }, "body")).toEqual(
      refused("body", ["row_ids.1", "must be a number"], ["row_ids.2", ID_MESSAGE]),
    );
    const tooMany = Array.from({ length: 1001 }, (_, i) => i + 1);
    expect(parse(PublicBatchDeleteBody, { row_ids: tooMany }, "body")).toEqual(
      refused("body", ["row_ids", "must have 1-1000 items"]),
    );
  });
});
