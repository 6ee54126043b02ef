import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  expectValidation,
  list,
  RECORD_TEST_RATE_LIMITS,
  type RecordShape,
  seed,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/** `where`: every operator on every type it fits, quoting, grouping, errors. */

let sys: TestSystem;
let api: ReturnType<typeof client>;
let tenant: Tenant;
let table: TestTable;
/** The records in creation order; expectations name them by index. */
let rows: RecordShape[];

const CAROL = 'carol "c" (admin), ~ops';

/** Six records; 4 is mostly empty and 5 wholly empty, so that blanks show in every operator. */
const VALUES: Record<string, unknown>[] = [
  {
    Name: "alice",
    Notes: "likes *tea*",
    Age: 30,
    Vip: true,
    Born: "1990-05-01",
    Seen: "2026-01-10T08:00:00Z",
    Status: "Active",
    Tags: ["a", "b"],
    Email: "alice@example.com",
    Site: "https://alice.example",
    Phone: "+1 555 0100",
    Meta: { k: 1 },
  },
  {
    Name: "bob",
    Notes: "Coffee 100%",
    Age: 17,
    Vip: false,
    Born: "2008-12-31",
    Seen: "2026-01-10T20:30:00Z",
    Status: "Lost",
    Tags: ["b"],
    Email: "bob@test.org",
    Site: "http://bob.test",
    Phone: "+44 20 7946 0000",
  },
  {
    Name: CAROL,
    Notes: "100 beans",
    Age: 45.5,
    Vip: true,
    Born: "1980-01-15",
    Seen: "2025-12-31T23:59:59Z",
    Status: "New",
    Tags: ["a,b"],
    Email: "carol@example.com",
    Site: "https://carol.example/path",
    Phone: "+1 555 0199",
  },
  {
    Name: "dave",
    Notes: "TEA time",
    Age: 18,
    Vip: false,
    Born: "2000-02-29",
    Seen: "2026-01-11T00:00:00Z",
    Status: "Active",
    Tags: ["a", "b", "c"],
    Email: "dave@test.org",
    Site: "https://dave.test",
    Phone: "+1 555 0123",
    Meta: [1, 2],
  },
  { Name: "eve", Age: -2, Vip: true, Tags: ["c"] },
  {},
];

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api, { plan: "business" });
  table = await createTable(api, tenant, [
    { name: "Name", type: "text" },
    { name: "Notes", type: "long_text" },
    { name: "Age", type: "number", options: { decimals: 1 } },
    { name: "Vip", type: "boolean" },
    { name: "Born", type: "date" },
    { name: "Seen", type: "datetime" },
    {
      name: "Status",
      type: "single_select",
      options: { choices: [{ name: "Active" }, { name: "Lost" }, { name: "New" }] },
    },
    {
      name: "Tags",
      type: "multi_select",
      options: { choices: [{ name: "a" }, { name: "b" }, { name: "c" }, { name: "a,b" }] },
    },
    { name: "Email", type: "email" },
    { name: "Site", type: "url" },
    { name: "Phone", type: "phone" },
    { name: "Meta", type: "json" },
    { name: "Serial", type: "autonumber" },
  ]);
  rows = await seed(api, tenant.writeToken, table, VALUES);
});

afterAll(async () => {
  await sys?.stop();
});

async function matching(where: string, t = table, from = rows) {
  const data = await list(api, tenant.readToken, t, { where });
  expect(data.total, where).toBe(data.records.length);
  return data.records.map((record) => from.findIndex((row) => row.row_id === record.row_id));
}

/** [where, indices of the matching records]. Negative operators include blank values. */
const CASES: Record<string, [string, number[]][]> = {
  text: [
    ["(Name,eq,bob)", [1]],
    ["(Name,neq,bob)", [0, 2, 3, 4, 5]],
    ["(Name,gt,carol)", [2, 3, 4]],
    ["(Name,gte,dave)", [3, 4]],
    ["(Name,lt,bob)", [0]],
    ["(Name,lte,bob)", [0, 1]],
    ["(Name,like,AV)", [3]],
    ["(Name,nlike,a)", [1, 4, 5]],
    ["(Name,in,alice,eve)", [0, 4]],
    ["(Name,nin,alice,eve)", [1, 2, 3, 5]],
    ["(Name,btw,b,d)", [1, 2]],
    ["(Name,blank)", [5]],
    ["(Name,notblank)", [0, 1, 2, 3, 4]],
  ],
  long_text: [
    ["(Notes,like,tea)", [0, 3]],
    ["(Notes,like,100%)", [1]],
    ["(Notes,nlike,tea)", [1, 2, 4, 5]],
    ["(Notes,eq,TEA time)", [3]],
    ["(Notes,blank)", [4, 5]],
    ["(Notes,notblank)", [0, 1, 2, 3]],
  ],
  number: [
    ["(Age,eq,18)", [3]],
    ["(Age,eq,45.5)", [2]],
    ["(Age,neq,18)", [0, 1, 2, 4, 5]],
    ["(Age,gt,18)", [0, 2]],
    ["(Age,gte,18)", [0, 2, 3]],
    ["(Age,lt,18)", [1, 4]],
    ["(Age,lte,17)", [1, 4]],
    ["(Age,in,17,30)", [0, 1]],
    ["(Age,nin,17,30)", [2, 3, 4, 5]],
    ["(Age,btw,17,30)", [0, 1, 3]],
    ["(Age,btw,-5,0)", [4]],
    ["(Age,blank)", [5]],
    ["(Age,notblank)", [0, 1, 2, 3, 4]],
  ],
  boolean: [
    ["(Vip,checked)", [0, 2, 4]],
    ["(Vip,notchecked)", [1, 3, 5]],
  ],
  date: [
    ["(Born,eq,2000-02-29)", [3]],
    ["(Born,neq,2000-02-29)", [0, 1, 2, 4, 5]],
    ["(Born,gt,1990-05-01)", [1, 3]],
    ["(Born,gte,1990-05-01)", [0, 1, 3]],
    ["(Born,lt,1990-05-01)", [2]],
    ["(Born,lte,1990-05-01)", [0, 2]],
    ["(Born,btw,1985-01-01,2005-01-01)", [0, 3]],
    ["(Born,in,1990-05-01,1980-01-15)", [0, 2]],
    ["(Born,nin,1990-05-01,1980-01-15)", [1, 3, 4, 5]],
    ["(Born,blank)", [4, 5]],
    ["(Born,notblank)", [0, 1, 2, 3]],
  ],
  datetime: [
    ["(Seen,eq,2026-01-10T08:00:00Z)", [0]],
    ["(Seen,eq,2026-01-10T09:00:00.000+01:00)", [0]],
    ["(Seen,eq,2026-01-10)", [0, 1]],
    ["(Seen,neq,2026-01-10T08:00:00Z)", [1, 2, 3, 4, 5]],
    ["(Seen,gt,2026-01-10T09:00:00+01:00)", [1, 3]],
    ["(Seen,gte,2026-01-10T08:00:00.000Z)", [0, 1, 3]],
    ["(Seen,lt,2026-01-01T00:00:00Z)", [2]],
    ["(Seen,lte,2026-01-10T20:30:00Z)", [0, 1, 2]],
    ["(Seen,btw,2026-01-01T00:00:00Z,2026-01-10T23:59:59Z)", [0, 1]],
    ["(Seen,in,2026-01-10T08:00:00Z,2026-01-11T00:00:00Z)", [0, 3]],
    ["(Seen,blank)", [4, 5]],
    ["(Seen,notblank)", [0, 1, 2, 3]],
  ],
  single_select: [
    ["(Status,eq,Active)", [0, 3]],
    ["(Status,neq,Active)", [1, 2, 4, 5]],
    ["(Status,in,Lost,New)", [1, 2]],
    ["(Status,nin,Lost,New)", [0, 3, 4, 5]],
    ["(Status,blank)", [4, 5]],
    ["(Status,notblank)", [0, 1, 2, 3]],
  ],
  multi_select: [
    ["(Tags,anyof,a)", [0, 3]],
    ["(Tags,anyof,a,c)", [0, 3, 4]],
    ['(Tags,anyof,"a,b")', [2]],
    ['(Tags,anyof,"a,b",c)', [2, 3, 4]],
    ["(Tags,allof,a,b)", [0, 3]],
    ["(Tags,allof,b)", [0, 1, 3]],
    ["(Tags,nanyof,a,c)", [1, 2, 5]],
    ['(Tags,nanyof,"a,b")', [0, 1, 3, 4, 5]],
    ["(Tags,blank)", [5]],
    ["(Tags,notblank)", [0, 1, 2, 3, 4]],
  ],
  email: [
    ["(Email,eq,bob@test.org)", [1]],
    ["(Email,neq,bob@test.org)", [0, 2, 3, 4, 5]],
    ["(Email,like,@EXAMPLE.com)", [0, 2]],
    ["(Email,nlike,example)", [1, 3, 4, 5]],
    ["(Email,in,bob@test.org,dave@test.org)", [1, 3]],
    ["(Email,nin,bob@test.org,dave@test.org)", [0, 2, 4, 5]],
    ["(Email,blank)", [4, 5]],
  ],
  url: [
    ["(Site,eq,http://bob.test)", [1]],
    ["(Site,neq,http://bob.test)", [0, 2, 3, 4, 5]],
    ["(Site,like,https://)", [0, 2, 3]],
    ["(Site,nlike,.example)", [1, 3, 4, 5]],
    ["(Site,in,http://bob.test,https://dave.test)", [1, 3]],
    ["(Site,notblank)", [0, 1, 2, 3]],
  ],
  phone: [
    ["(Phone,eq,+1 555 0100)", [0]],
    ["(Phone,like,555)", [0, 2, 3]],
    ["(Phone,nlike,555)", [1, 4, 5]],
    ["(Phone,in,+1 555 0100,+1 555 0199)", [0, 2]],
    ["(Phone,blank)", [4, 5]],
  ],
  json: [
    ["(Meta,blank)", [1, 2, 4, 5]],
    ["(Meta,notblank)", [0, 3]],
  ],
  autonumber: [
    ["(Serial,eq,1)", [0]],
    ["(Serial,gt,3)", [3, 4, 5]],
    ["(Serial,lte,2)", [0, 1]],
    ["(Serial,btw,2,3)", [1, 2]],
    ["(Serial,in,1,6)", [0, 5]],
    ["(Serial,nin,1,6)", [1, 2, 3, 4]],
    ["(Serial,notblank)", [0, 1, 2, 3, 4, 5]],
  ],
  'quoting: values holding , ( ) ~ and "': [
    [`(Name,eq,"carol ""c"" (admin), ~ops")`, [2]],
    ['(Name,like,"(admin), ~")', [2]],
    ["(Name,like,~ops)", [2]],
    ['(Name,eq,"bob")', [1]],
    [`(Name,in,"carol ""c"" (admin), ~ops",bob)`, [1, 2]],
    [`(Name,nin,"carol ""c"" (admin), ~ops",bob)`, [0, 3, 4, 5]],
    ['(Name,like,"""c""")', [2]],
    ['(Name,eq,"carol")', []],
    // Text that would mean something to SQL or LIKE means nothing here.
    ["(Name,eq,x' or '1'='1)", []],
    ["(Name,like,%)", []],
    ["(Name,like,_)", []],
    ["(Name,like,\\)", []],
    ['(Name,in,"bob"" or 1=1 --")', []],
  ],
  "~not, groups and precedence": [
    ["~not(Vip,checked)", [1, 3, 5]],
    ["~not(Age,gt,18)", [1, 3, 4, 5]],
    ["~not~not(Name,eq,bob)", [1]],
    ["~not((Name,eq,bob)~or(Name,eq,dave))", [0, 2, 4, 5]],
    ["(Vip,checked)~and((Age,gte,40)~or(Status,eq,Active))", [0, 2]],
    // ~and binds tighter than ~or: bob, or (VIP and over 40).
    ["(Name,eq,bob)~or(Vip,checked)~and(Age,gt,40)", [1, 2]],
    ["(Vip,checked)~and(Age,gt,40)~or(Name,eq,bob)", [1, 2]],
    ["((Name,eq,bob)~or(Vip,checked))~and(Age,gt,40)", [2]],
    ["(Age,gt,10)~and(Vip,notchecked)~or(Tags,anyof,c)~and(Status,blank)", [1, 3, 4]],
    [
      "((Age,gt,10)~and((Tags,anyof,a)~or(Tags,anyof,c)))~and~not(Status,eq,Lost)~and(Name,neq,dave)",
      [0],
    ],
    ["((((((Age,gt,10))))))", [0, 1, 2, 3]],
    ["(Name,eq,nobody)", []],
  ],
};

describe("where: every operator on every type it fits", () => {
  for (const [type, cases] of Object.entries(CASES)) {
    it(type, async () => {
      for (const [where, expected] of cases) {
        expect(await matching(where), where).toEqual(expected);
      }
    });
  }

  it("takes field ids as references and gives the same answer on the v1 route", async () => {
    expect(await matching(`(${table.id("Age")},gt,18)~and(${table.id("Vip")},checked)`)).toEqual([
      0, 2,
    ]);
    const response = await api("GET", v1(tenant.databaseId, table.tableId).records, {
      token: tenant.readToken,
      query: { where: '(Tags,anyof,"a,b",c)', limit: "1" },
    });
    expect(response.status).toBe(200);
    expect(response.body.data.total).toBe(3);
    expect(response.body.data.records.map((r: RecordShape) => r.row_id)).toEqual([rows[2]!.row_id]);
  });

  it("counts every match in total whatever the page", async () => {
    const data = await list(api, tenant.readToken, table, {
      where: "(Vip,checked)",
      limit: 1,
      offset: 1,
    });
    expect(data.total).toBe(3);
    expect(data.records.map((r) => r.row_id)).toEqual([rows[2]!.row_id]);
  });
});

describe("where: relative dates", () => {
  const day = (offset: number) =>
    new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);

  it("reads today, yesterday, tomorrow, daysAgo:N and daysFromNow:N in UTC", async () => {
    const checks: [string, number[]][] = [
      ["(Due,eq,today)", [0]],
      ["(Due,eq,yesterday)", [1]],
      ["(Due,eq,tomorrow)", [2]],
      ["(Due,eq,daysAgo:3)", [3]],
      ["(Due,eq,daysFromNow:2)", [4]],
      ["(Due,lt,today)", [1, 3]],
      ["(Due,gte,daysAgo:1)", [0, 1, 2, 4]],
      ["(Due,btw,daysAgo:3,yesterday)", [1, 3]],
      ["(Due,gt,daysFromNow:2)", []],
      ["(Due,neq,today)", [1, 2, 3, 4, 5]],
      ["(At,eq,today)", [0]],
      ["(At,eq,yesterday)", [1]],
      ["(At,lt,today)", [1, 3]],
      ["(At,gte,tomorrow)", [2, 4]],
      ["(At,btw,daysAgo:3,today)", [0, 1, 3]],
      ["(At,lte,daysFromNow:2)", [0, 1, 2, 3, 4]],
      ["(At,gt,daysFromNow:2)", []],
      ["(Made,eq,today)", [0, 1, 2, 3, 4, 5]],
      ["(Made,lt,today)", []],
      ["(Made,gte,daysAgo:1)", [0, 1, 2, 3, 4, 5]],
    ];
    // Should the UTC day change while the test runs, it runs again on the new day.
    for (let attempt = 0; attempt < 2; attempt++) {
      const today = day(0);
      const t = await createTable(api, tenant, [
        { name: "Due", type: "date" },
        { name: "At", type: "datetime" },
        { name: "Made", type: "created_at" },
      ]);
      const made = await seed(api, tenant.writeToken, t, [
        { Due: day(0), At: `${day(0)}T00:00:00.000Z` },
        { Due: day(-1), At: `${day(-1)}T23:59:59.999Z` },
        { Due: day(1), At: `${day(1)}T00:00:00.000Z` },
        { Due: day(-3), At: `${day(-3)}T12:00:00.000Z` },
        { Due: day(2), At: `${day(2)}T23:59:59.999Z` },
        {},
      ]);
      const answers: [string, number[]][] = [];
      for (const [where] of checks) answers.push([where, await matching(where, t, made)]);
      if (day(0) !== today && attempt === 0) continue;
      expect(answers).toEqual(checks);
      break;
    }
  });
});

describe("where: malformed expressions answer 400 and never fail open", () => {
  const conditions = (n: number) =>
    Array.from({ length: n }, (_, i) => `(Age,neq,${1000 + i})`).join("~and");
  const longValue = (length: number) => `(Name,eq,"${"x".repeat(length - 12)}")`;

  it("accepts what sits right at the limits", async () => {
    expect(await matching(conditions(50))).toEqual([0, 1, 2, 3, 4, 5]);
    expect(longValue(4096)).toHaveLength(4096);
    expect(await matching(longValue(4096))).toEqual([]);
    expect(await matching(`${"(".repeat(9)}(Age,gt,40)${")".repeat(9)}`)).toEqual([2]);
  });

  const BAD: [string, string, RegExp][] = [
    ["unknown field", "(Nope,eq,1)", /at 2\b/],
    ["unknown field id", "(999999,eq,1)", /at 2\b/],
    ["unknown operator", "(Status,eqq,Active)", /^unknown operator 'eqq' at 9$/],
    ["operator not fitting text", "(Name,checked)", /at 7\b/],
    ["operator not fitting a number", "(Age,anyof,1)", /at 6\b/],
    ["operator not fitting a boolean", "(Vip,gt,true)", /at 6\b/],
    ["operator not fitting a multi-select", "(Tags,gt,a)", /at 7\b/],
    ["operator not fitting json", "(Meta,eq,1)", /at 7\b/],
    ["number that does not parse", "(Age,eq,abc)", /at 9\b/],
    ["date that does not exist", "(Born,eq,2026-02-30)", /at 10\b/],
    ["datetime that does not parse", "(Seen,gt,soon)", /at 10\b/],
    ["relative date that does not parse", "(Born,gt,daysAgo:x)", /at 10\b/],
    ["missing value", "(Age,eq)", /at \d+/],
    ["btw with one value", "(Age,btw,1)", /at \d+/],
    ["unbalanced: open", "((Age,eq,1)", /at \d+/],
    ["unbalanced: close", "(Age,eq,1))", /at \d+/],
    ["unbalanced: unclosed condition", "(Age,eq,1", /at \d+/],
    ["unterminated quote", '(Name,eq,"abc)', /at \d+/],
    ["no parentheses", "Age,eq,1", /at \d+/],
    ["unknown connective", "(Age,eq,1)~xor(Age,eq,2)", /at \d+/],
    ["missing connective", "(Age,eq,1)(Age,eq,2)", /at \d+/],
    ["leading connective", "~and(Age,eq,1)", /at \d+/],
    ["trailing connective", "(Age,eq,1)~or", /at \d+/],
    ["empty group", "()", /at \d+/],
    ["depth over 10", `${"(".repeat(12)}(Age,gt,1)${")".repeat(12)}`, /at \d+/],
    ["more than 50 conditions", conditions(51), /at \d+/],
  ];

  it.each(BAD)("refuses %s", async (_, where, message) => {
    for (const [path, query] of [
      ["/public/record/list", q({ database_id: tenant.databaseId, table_id: table.tableId })],
      [v1(tenant.databaseId, table.tableId).records, {}],
    ] as const) {
      const response = await api("GET", path, {
        token: tenant.readToken,
        query: { ...query, where },
      });
      expectValidation(response, [
        { key: "where", source: "query", message: expect.stringMatching(message) },
      ]);
      expect(response.body.extra, where).toHaveLength(1);
    }
  });

  it("refuses a where longer than 4096 characters", async () => {
    const response = await api("GET", v1(tenant.databaseId, table.tableId).records, {
      token: tenant.readToken,
      query: { where: longValue(4097) },
    });
    expectValidation(response, [{ key: "where", source: "query" }]);
  });

  it("answers a URL past 16 KiB with 431 in the error envelope", async () => {
    const url = `${sys.baseUrl}${v1(tenant.databaseId, table.tableId).records}`;
    const response = await fetch(`${url}?where=(Name,eq,x)&pad=${"a".repeat(20_000)}`, {
      headers: { authorization: `Bearer ${tenant.readToken}` },
    });
    expect(response.status).toBe(431);
    expect(await response.json()).toEqual({ message: "request_header_too_large", data: {} });
  });
});
