import { beforeAll, describe, expect, it } from "vitest";
import type { ApiResponse } from "../e2e/support/http.js";
import { expectError, q } from "../e2e/support/organizations.js";
import {
  createTable,
  createTenant,
  expectValidation,
  seed,
  type Tenant,
  type TestTable,
  v1,
} from "../e2e/support/records.js";
import { securitySystem } from "./support/fixture.js";

/**
 * Hostile input: filter, sort and field references that try SQL, quoted identifiers, system
 * columns and `__proto__`; deep and huge expressions; record values of the wrong type or past
 * what a number field keeps exactly; ids in v1 paths that are no integers; repeated and
 * oversized parameters; names with NUL, control, bidi or only invisible characters, look-alike
 * names, 10,000 characters; request ids that could inject. Each answers the exact 400 (or, for
 * a well-formed filter whose value is hostile, an honest empty result), never a 500, and leaves
 * the database and the quota counters as they were.
 */

const ctx = securitySystem();
let tenant: Tenant;
let table: TestTable;
const HOSTILE = `O'Brien"); drop table records.record; --`;

beforeAll(async () => {
  tenant = await createTenant(ctx.sys, ctx.api, { plan: "business" });
  ctx.state.track(tenant.orgId);
  table = await createTable(ctx.api, tenant, [
    { name: "Name", type: "text" },
    { name: "N", type: "number" },
    { name: "Day", type: "date" },
    { name: "Moment", type: "datetime" },
    { name: "Flag", type: "boolean" },
    { name: "Tags", type: "multi_select", options: { choices: [{ name: "a" }, { name: "b" }] } },
    { name: "Meta", type: "json" },
  ]);
  await seed(ctx.api, tenant.writeToken, table, [
    { Name: "plain", N: 1 },
    { Name: HOSTILE, N: 2 },
  ]);
});

const listWith = (query: Record<string, string>) =>
  ctx.api("GET", "/public/record/list", {
    token: tenant.readToken,
    query: { database_id: String(table.databaseId), table_id: String(table.tableId), ...query },
  });

/** A read of the record routes is still one counted call of the organization. */
const oneCall = () => ({ counters: { [`api-calls:${tenant.orgId}`]: 1 } });

describe("where/sort/fields injection", () => {
  it("SQL metacharacters in a quoted filter value are data: exactly the matching row", async () => {
    const quoted = `"${HOSTILE.replaceAll('"', '""')}"`;
    await ctx.state.unchanged(
      async () => {
        const response = await listWith({ where: `(Name,eq,${quoted})`, response_format: "names" });
        expect(response.status, JSON.stringify(response.body)).toBe(200);
        expect(response.body.data.total).toBe(1);
        expect(response.body.data.records[0].data.Name).toBe(HOSTILE);
        const like = await listWith({ where: `(Name,like,"%' or '1'='1")` });
        expect(like.status).toBe(200);
        expect(like.body.data.total).toBe(0);
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 2 } },
    );
  });

  const badWhere: [string, string][] = [
    ["an unquoted value that breaks out of the condition", `(Name,eq,x');drop table record;--)`],
    ["a quoted SQL identifier as the reference", `("data"->>'1',eq,1)`],
    ["a SQL expression as the reference", `(1=1 or Name,eq,x)`],
    ["the system column organization_id", `(organization_id,eq,1)`],
    ["the system column table_id", `(table_id,neq,0)`],
    ["the system column deleted_at", `(deleted_at,blank)`],
    ["the user table's column version", `(version,gt,0)`],
    ["the user table's column created_by", `(created_by,notblank)`],
    ["a user table's column name for a field", `(f_1,notblank)`],
    ["__proto__ as the reference", `(__proto__,eq,x)`],
    ["constructor as the reference", `(constructor,notblank)`],
    ["an operator smuggling SQL", `(Name,eq or 1=1,x)`],
    ["a number value that is SQL", `(N,gt,0 or 1=1)`],
    ["NaN as a number value", `(N,gt,NaN)`],
    ["1e309 as a number value", `(N,lt,1e309)`],
    ["an impossible date value", `(Day,eq,2026-02-30)`],
  ];

  it.each(badWhere)("where with %s: 400 on `where`", async (_name, where) => {
    await ctx.state.unchanged(async () => {
      expectValidation(await listWith({ where }), [{ key: "where", source: "query" }]);
    }, oneCall());
  });

  const badRefs: [string, Record<string, string>, string][] = [
    ["sort with SQL", { sort: "Name;drop table record" }, "sort"],
    ["sort with a direction keyword", { sort: "Name desc" }, "sort"],
    ["sort by a quoted identifier", { sort: '"organization_id"' }, "sort"],
    ["sort by a system column", { sort: "-organization_id" }, "sort"],
    ["sort by the user table's column version", { sort: "-version" }, "sort"],
    ["sort by __proto__", { sort: "__proto__" }, "sort"],
    ["fields with *", { fields: "Name,*" }, "fields"],
    ["fields with SQL", { fields: "Name) from records.record --" }, "fields"],
    ["fields naming __proto__", { fields: "__proto__" }, "fields"],
    ["fields naming a system column", { fields: "table_id" }, "fields"],
    ["fields naming the user table's column updated_by", { fields: "updated_by" }, "fields"],
  ];

  it.each(badRefs)("%s: 400 on the parameter", async (_name, query, key) => {
    await ctx.state.unchanged(async () => {
      expectValidation(await listWith(query), [{ key, source: "query" }]);
    }, oneCall());
  });

  it("deep nesting and huge expressions: 400, never a 500 or a timeout", async () => {
    const depth11 = `${"(".repeat(11)}(Name,eq,a)${")".repeat(11)}`;
    // Just under the 4,096 characters a filter may have: the depth check must refuse it
    // without recursing 2,000 levels deep.
    const deep = `${"(".repeat(2_000)}(Name,eq,a)${")".repeat(2_000)}`;
    const nots = `${"~not".repeat(1000)}(Name,eq,a)`;
    const conditions51 = Array.from({ length: 51 }, (_, i) => `(N,eq,${i})`).join("~or");
    const long = `(Name,eq,"${"x".repeat(4_100)}")`;
    await ctx.state.unchanged(
      async () => {
        for (const where of [depth11, deep, nots, conditions51, long]) {
          const response = await listWith({ where });
          expectValidation(response, [{ key: "where", source: "query" }]);
        }
        // The one past 4,096 characters is refused by the gateway before it is charged.
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 4 } },
    );
  });

  it("a filter at the limits still works (depth 10, 50 conditions)", async () => {
    const depth10 = `${"(".repeat(9)}(N,eq,1)${")".repeat(9)}`;
    const conditions50 = Array.from({ length: 50 }, (_, i) => `(N,eq,${i})`).join("~or");
    await ctx.state.unchanged(
      async () => {
        for (const where of [depth10, conditions50]) {
          const response = await listWith({ where });
          expect(response.status, `${where}: ${JSON.stringify(response.body)}`).toBe(200);
        }
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 2 } },
    );
  });
});

describe("type confusion in record values: 400 on the key, nothing written", () => {
  const p = () => v1(table.databaseId, table.tableId);
  const cases: [string, string, string][] = [
    ["an object for a number (operator injection)", `{"data":{"N":{"$gt":0}}}`, "N"],
    ["NaN as a string for a number", `{"data":{"N":"NaN"}}`, "N"],
    ["Infinity as a string for a number", `{"data":{"N":"Infinity"}}`, "N"],
    ["1e309 (overflows to Infinity) for a number", `{"data":{"N":1e309}}`, "N"],
    ["-1e309 for a number", `{"data":{"N":-1e309}}`, "N"],
    ["an array for a text", `{"data":{"Name":["a","b"]}}`, "Name"],
    ["an object for a text", `{"data":{"Name":{"toString":"x"}}}`, "Name"],
    ["an impossible date (February 30th)", `{"data":{"Day":"2026-02-30"}}`, "Day"],
    ["a thirteenth month", `{"data":{"Day":"2026-13-01"}}`, "Day"],
    ["a date of year 0", `{"data":{"Day":"0000-00-00"}}`, "Day"],
    ["an impossible datetime (25 o'clock)", `{"data":{"Moment":"2026-01-01T25:00:00Z"}}`, "Moment"],
    ["a string for a boolean", `{"data":{"Flag":"yes"}}`, "Flag"],
    ["an object for a boolean", `{"data":{"Flag":{}}}`, "Flag"],
    ["a string for a multi-select", `{"data":{"Tags":"a"}}`, "Tags"],
    // Refused while parsing, before any schema: the whole body is the culprit.
    ["__proto__ as a field reference", `{"data":{"__proto__":{"Name":"x"}}}`, "body"],
    ["constructor as a field reference", `{"data":{"constructor":"x"}}`, "constructor"],
    ["a text of 10,001 characters", JSON.stringify({ data: { Name: "x".repeat(10_001) } }), "Name"],
  ];

  /** What the gateway refuses itself is refused before the call is charged. */
  const refusedByGateway = (rawBody: string) => /__proto__|e309/.test(rawBody);

  it.each(cases)("%s", async (_name, rawBody, key) => {
    await ctx.state.unchanged(
      async () => {
        const response = await ctx.api("POST", p().records, {
          token: tenant.writeToken,
          rawBody,
          headers: { "content-type": "application/json" },
        });
        expectValidation(response, [{ key, source: "body" }]);
      },
      refusedByGateway(rawBody) ? {} : oneCall(),
    );
  });

  it("2^63 and other out-of-range ids: 400 on row_id, never a 500 or a wrap-around", async () => {
    await ctx.state.unchanged(async () => {
      for (const id of ["9223372036854775808", "9223372036854775807", "18446744073709551617"]) {
        const response = await ctx.api("PATCH", p().record(id), {
          token: tenant.writeToken,
          body: { data: { Name: "x" } },
        });
        expectValidation(response, [{ key: "row_id", source: "path" }]);
      }
      expectError(
        await ctx.api("PATCH", p().record(String(Number.MAX_SAFE_INTEGER)), {
          token: tenant.writeToken,
          body: { data: { Name: "x" } },
        }),
        404,
        "record_not_found",
      );
      // Not a plain positive integer: the same 400 on row_id, never a 404 that reads as "gone".
      for (const id of ["-1", "0x10", "1e3", "abc", "1.0", "%20"]) {
        const response = await ctx.api("PATCH", p().record(id), {
          token: tenant.writeToken,
          body: { data: { Name: "x" } },
        });
        expectValidation(response, [{ key: "row_id", source: "path" }]);
      }
      const batch = await ctx.api("POST", p().batchDelete, {
        token: tenant.writeToken,
        rawBody: `{"row_ids":[9223372036854775808]}`,
        headers: { "content-type": "application/json" },
      });
      expectValidation(batch, [{ key: "row_ids.0", source: "body" }]);
      const query = await ctx.api("PUT", "/public/record/update", {
        token: tenant.writeToken,
        query: { table_id: String(table.tableId), row_id: "9223372036854775808" },
        body: { data: { Name: "x" } },
      });
      expectValidation(query, [{ key: "row_id", source: "query" }]);
    }, oneCall());
  });

  it("a number a double cannot hold exactly (2^63, as a number or a string): 400 on its key, nothing written", async () => {
    const [{ row_id: rowId }] = await seed(ctx.api, tenant.writeToken, table, [{ N: 7 }]);
    const beyond =
      "must be between -9007199254740991 and 9007199254740991, the largest numbers a number field keeps exactly";
    await ctx.state.unchanged(
      async () => {
        for (const rawBody of [
          `{"data":{"N":9223372036854775808}}`,
          `{"data":{"N":"9223372036854775808"}}`,
          `{"data":{"N":-9007199254740993}}`,
          `{"data":{"N":1e300}}`,
        ]) {
          for (const [method, path] of [
            ["POST", p().records],
            ["PATCH", p().record(rowId)],
          ] as const) {
            const response = await ctx.api(method, path, {
              token: tenant.writeToken,
              rawBody,
              headers: { "content-type": "application/json" },
            });
            expect(response.body, `${method} ${rawBody}`).toEqual({
              status_code: 400,
              detail: `Validation failed for ${method} ${path}`,
              extra: [{ key: "N", message: beyond, source: "body", code: "invalid_value" }],
            });
          }
        }
        const got = await ctx.api("GET", p().record(rowId), { token: tenant.readToken });
        expect(got.body.data.record.data[table.id("N")]).toBe(7);
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 9 } },
    );
  });
  it("a fraction with more significant digits than a double keeps: 400 on its key, nothing written", async () => {
    const priced = await createTable(ctx.api, tenant, [
      { name: "Price", type: "number", options: { decimals: 10 } },
    ]);
    const [{ row_id: rowId }] = await seed(ctx.api, tenant.writeToken, priced, [{ Price: 1.5 }]);
    const paths = v1(priced.databaseId, priced.tableId);
    const message =
      "must have at most 15 significant digits once rounded to 10 decimal places (or be a whole number): a number field keeps no more exactly";
    await ctx.state.unchanged(
      async () => {
        for (const rawBody of [
          `{"data":{"Price":123456789012.123456789}}`,
          `{"data":{"Price":"123456789012.123456789"}}`,
          `{"data":{"Price":12345678.1234567891}}`,
        ]) {
          const response = await ctx.api("PATCH", paths.record(rowId), {
            token: tenant.writeToken,
            rawBody,
            headers: { "content-type": "application/json" },
          });
          expect(response.body, rawBody).toEqual({
            status_code: 400,
            detail: `Validation failed for PATCH ${paths.record(rowId)}`,
            extra: [{ key: "Price", message, source: "body", code: "invalid_value" }],
          });
        }
        const got = await ctx.api("GET", paths.record(rowId), { token: tenant.readToken });
        expect(got.body.data.record.data[priced.id("Price")]).toBe(1.5);
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 4 } },
    );
  });
});

describe("ids in v1 paths", () => {
  it("a word, a sign, a fraction or hex as any id of a v1 path: 400 with source path, nothing changes", async () => {
    const message = "must be an integer between 1 and 9007199254740991";
    const d = table.databaseId;
    const t = table.tableId;
    const cases: [string, string, string[], unknown?][] = [
      ["GET", `/public/v1/databases/x/tables/${t}/records`, ["database_id"]],
      ["GET", `/public/v1/databases/${d}/tables/1.5/records`, ["table_id"]],
      ["GET", `/public/v1/databases/${d}/tables/${t}/records/abc`, ["row_id"]],
      ["PATCH", `/public/v1/databases/${d}/tables/${t}/records/-1`, ["row_id"], { data: {} }],
      ["DELETE", `/public/v1/databases/${d}/tables/${t}/records/0x10`, ["row_id"]],
      [
        "DELETE",
        `/public/v1/databases/x/tables/y/records/z`,
        ["database_id", "table_id", "row_id"],
      ],
      ["POST", `/public/v1/databases/${d}/tables/%2F/records`, ["table_id"], { data: {} }],
      ["GET", `/public/v1/databases/__proto__/tables/${t}/openapi.json`, ["database_id"]],
    ];
    await ctx.state.unchanged(async () => {
      for (const [method, path, keys, body] of cases) {
        const response = await ctx.api(method, path, {
          token: tenant.writeToken,
          ...(body === undefined ? {} : { body }),
        });
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 400,
          body: {
            status_code: 400,
            detail: `Validation failed for ${method} ${path}`,
            extra: keys.map((key) => ({ key, message, source: "path", code: "invalid_value" })),
          },
        });
      }
    });
  });
});

describe("oversized and overdeep bodies and parameters", () => {
  const p = () => v1(table.databaseId, table.tableId);

  it("a JSON value nested 10,000 levels deep: 400 on the field, no stack overflow", async () => {
    const deep = `${"[".repeat(10_000)}${"]".repeat(10_000)}`;
    await ctx.state.unchanged(async () => {
      for (const [method, path] of [
        ["POST", p().records],
        ["POST", p().batch],
      ] as const) {
        const rawBody =
          path === p().batch
            ? `{"records":[{"data":{"Meta":${deep}}}]}`
            : `{"data":{"Meta":${deep}}}`;
        const response = await ctx.api(method, path, {
          token: tenant.writeToken,
          rawBody,
          headers: { "content-type": "application/json" },
        });
        expectValidation(response, [
          {
            key: path === p().batch ? expect.stringMatching(/^records\.0\.data\.Meta/) : "Meta",
            source: "body",
          },
        ]);
      }
    });
  });

  it.each([
    "application/json; charset=utf-16",
    "application/json; charset=iso-8859-1",
    "text/plain",
    "application/x-www-form-urlencoded",
  ])("a body sent as %s: 400 on content-type, nothing written", async (type) => {
    await ctx.state.unchanged(async () => {
      const response = await ctx.api("POST", p().records, {
        token: tenant.writeToken,
        rawBody: `{"data":{"Name":"smuggled"}}`,
        headers: { "content-type": type },
      });
      expectValidation(response, [{ key: "content-type", source: "header" }]);
    });
  });

  it("a body over 1 MiB: 413 payload_too_large, nothing written", async () => {
    await ctx.state.unchanged(async () => {
      const response = await ctx.api("POST", p().records, {
        token: tenant.writeToken,
        body: { data: { Meta: { blob: "x".repeat(1024 * 1024) } } },
      });
      expectError(response, 413, "payload_too_large");
    });
  });

  it.each([
    ["limit", "1e309"],
    ["limit", "-1"],
    ["limit", "1001"],
    ["offset", "-1"],
    ["offset", "9223372036854775808"],
    ["response_format", "__proto__"],
    ["rich_text", "constructor"],
  ])("list with %s=%s: 400 on the parameter", async (key, value) => {
    await ctx.state.unchanged(async () => {
      expectValidation(await listWith({ [key]: value }), [{ key, source: "query" }]);
    });
  });

  it("a storage check for 2^63 or a negative number of bytes: 400 on file_size", async () => {
    await ctx.state.unchanged(async () => {
      for (const size of ["9223372036854775808", "-1", "1e309", "NaN"]) {
        const response = await ctx.api("POST", "/file/storage_check", {
          token: tenant.writeToken,
          query: { row_id: "1", file_size: size },
        });
        expectValidation(response, [{ key: "file_size", source: "query" }]);
      }
    });
  });
  it("sort or fields longer than a request line carries (431), a parameter given twice (400): nothing changes", async () => {
    const long = Array.from({ length: 3_300 }, () => "Name").join(",");
    const base = `/public/record/list?database_id=${table.databaseId}&table_id=${table.tableId}`;
    await ctx.state.unchanged(async () => {
      for (const key of ["sort", "fields"]) {
        expectError(await listWith({ [key]: long }), 431, "request_header_too_large");
      }
      // A second table id (another organization's, say) must not be one of two to pick from.
      for (const [path, key] of [
        [`${base}&table_id=${table.tableId + 1}`, "table_id"],
        [`${base}&limit=1&limit=1000`, "limit"],
        [`${base}&where=(N,eq,1)&where=(N,eq,2)`, "where"],
      ] as const) {
        const response = await ctx.api("GET", path, { token: tenant.readToken });
        expectValidation(response, [{ key, source: "query", message: "must be given once" }]);
      }
    });
  });
});

describe("names with NUL, control and bidi characters or 10,000 characters", () => {
  const NAMES: [string, string][] = [
    ["NUL", "evil\u0000name"],
    ["a line break", "two\nlines"],
    ["an escape sequence", "red\u001b[31m"],
    ["DEL", "del\u007f"],
    ["a C1 control", "c1\u009b"],
    ["a right-to-left override", "invoice\u202egnp.exe"],
    ["a right-to-left isolate", "admin\u2067x"],
    ["10,000 characters", "n".repeat(10_000)],
    ["only spaces", "   "],
    ["a lone surrogate", "bad\ud800"],
  ];

  type Route = [string, (name: string) => Promise<ApiResponse>];
  const routes = (): Route[] => [
    [
      "organization/create",
      (name) =>
        ctx.api("POST", "/organization/create", { token: tenant.owner.token, body: { name } }),
    ],
    [
      "database/create",
      (name) =>
        ctx.api("POST", "/database/create", {
          token: tenant.owner.token,
          query: q({ organization_id: tenant.orgId }),
          body: { name },
        }),
    ],
    [
      "table/update",
      (name) =>
        ctx.api("POST", "/table/update", {
          token: tenant.owner.token,
          query: q({ table_id: table.tableId }),
          body: { name },
        }),
    ],
    [
      "field/create",
      (name) =>
        ctx.api("POST", "/field/create", {
          token: tenant.owner.token,
          query: q({ table_id: table.tableId }),
          body: { name, type: "text" },
        }),
    ],
    [
      "api_token/create",
      (name) =>
        ctx.api("POST", "/api_token/create", {
          token: tenant.owner.token,
          query: q({ organization_id: tenant.orgId }),
          body: { name, access: "read" },
        }),
    ],
  ];

  it.each(NAMES)("a name with %s is refused on every naming route", async (_what, name) => {
    await ctx.state.unchanged(async () => {
      for (const [route, call] of routes()) {
        const response = await call(name);
        expect(response.status, `${route}: ${JSON.stringify(response.body)}`).toBe(400);
        expectValidation(response, [{ key: "name", source: "body" }]);
      }
    });
  });
});

describe("look-alike and invisible names", () => {
  it("another case or a decomposed accent is the same field name; invisible characters alone are none", async () => {
    const accented = await createTable(ctx.api, tenant, [{ name: "Café", type: "text" }]);
    const createField = (name: string) =>
      ctx.api("POST", "/field/create", {
        token: tenant.owner.token,
        query: q({ table_id: accented.tableId }),
        body: { name, type: "text" },
      });
    await ctx.state.unchanged(async () => {
      for (const name of ["CAFÉ", "café", "Cafe\u0301", "CAFE\u0301", "  Café  "]) {
        expectError(await createField(name), 400, "field_name_taken");
      }
      for (const name of ["\u200b", "\u200b\u2060\ufeff", "\u00ad", "\u3164"]) {
        const response = await createField(name);
        expectValidation(response, [{ key: "name", source: "body" }]);
        const renamed = await ctx.api("POST", "/table/update", {
          token: tenant.owner.token,
          query: q({ table_id: accented.tableId }),
          body: { name },
        });
        expectValidation(renamed, [{ key: "name", source: "body" }]);
      }
    });
  });
});

describe("header values", () => {
  it("an X-Request-Id that could inject into logs or headers is replaced, never echoed", async () => {
    const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    const hostile = [
      "abc<script>alert(1)</script>",
      "a b c",
      "x".repeat(129),
      "évil",
      "id;Set-Cookie=session=1",
      "%0d%0aSet-Cookie:%20x=1",
      '{"level":60,"msg":"forged"}',
    ];
    await ctx.state.unchanged(
      async () => {
        for (const id of hostile) {
          const response = await ctx.api("GET", "/public/record/list", {
            token: tenant.readToken,
            query: { database_id: String(table.databaseId), table_id: String(table.tableId) },
            headers: { "x-request-id": id },
          });
          expect(response.status, id).toBe(200);
          expect(response.body.message).toBe("success");
          expect(response.headers.get("x-request-id")).toMatch(UUID);
          expect(response.headers.get("set-cookie")).toBeNull();
        }
        const sane = await listWith({});
        expect(sane.status).toBe(200);
        const echoed = await ctx.api("GET", "/public/record/list", {
          token: tenant.readToken,
          query: { database_id: String(table.databaseId), table_id: String(table.tableId) },
          headers: { "x-request-id": "client-id.42:retry-1" },
        });
        expect(echoed.headers.get("x-request-id")).toBe("client-id.42:retry-1");
      },
      { counters: { [`api-calls:${tenant.orgId}`]: hostile.length + 2 } },
    );
  });
});
