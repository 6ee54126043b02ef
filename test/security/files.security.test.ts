import { randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import {
  enterprise,
  filePart,
  fileTable,
  PNG,
  pair,
  type Raw,
  raw,
  storageUsage,
} from "../e2e/support/files.js";
import { expectError, q } from "../e2e/support/organizations.js";
import { createTenant, expectValidation, type Tenant } from "../e2e/support/records.js";
import { securitySystem } from "./support/fixture.js";

/**
 * Files: renames that try to leave the directory, active content uploaded under an image type,
 * signed URLs tampered with or expired, files of deleted records, field ids of no field, of
 * another organization or of the wrong type, and uploads racing the storage limit.
 */

/** Short enough to watch a link expire, long enough for the other link tests to finish first. */
const URL_TTL_SECONDS = 5;
const ctx = securitySystem({ FILE_URL_TTL_SECONDS: String(URL_TTL_SECONDS) });
let tenant: Tenant;
let fieldId: number;
let rowIds: number[];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const asResponse = (r: Raw) => ({ status: r.status, body: r.json });

beforeAll(async () => {
  tenant = await createTenant(ctx.sys, ctx.api);
  await enterprise(ctx.sys, tenant, {});
  ctx.state.track(tenant.orgId);
  ({ fieldId, rowIds } = await fileTable(ctx.api, tenant, 6));
  const uploaded = await raw(ctx.sys.baseUrl, "POST", `/file/upload?${pair(rowIds[0]!, fieldId)}`, {
    token: tenant.writeToken,
    body: filePart(PNG, "kept.png", "image/png"),
  });
  expect(uploaded.status).toBe(200);
});

describe("file rename: no path tricks, no control characters", () => {
  // Refused by the gateway before the call is charged, and by the files service behind it.
  const NAMES: [string, string][] = [
    ["a parent-directory traversal", "../../../../etc/passwd"],
    ["an absolute path", "/etc/passwd"],
    ["a Windows traversal", "..\\..\\windows\\win.ini"],
    ["an encoded traversal left as is", "..%2F..%2Fetc%2Fpasswd/x"],
    ["a NUL byte before an extension", "report.pdf\u0000.exe"],
    ["a right-to-left override", "invoice\u202egnp.exe"],
    ["a line break (header injection)", "a.png\r\nSet-Cookie: x=1"],
    ["256 characters", `${"a".repeat(252)}.png`],
    ["10,000 characters", "b".repeat(10_000)],
  ];

  it.each(NAMES)("%s: 400 on file_name, the stored name stays", async (_what, fileName) => {
    await ctx.state.unchanged(async () => {
      const response = await ctx.api("POST", "/file/rename", {
        token: tenant.writeToken,
        query: q({ row_id: rowIds[0]!, field_id: fieldId }),
        body: { file_name: fileName },
      });
      expectValidation(response, [{ key: "file_name", source: "body" }]);
    });
  });

  it("'..' and '.' alone are no file names either", async () => {
    await ctx.state.unchanged(async () => {
      for (const fileName of ["..", "."]) {
        const response = await ctx.api("POST", "/file/rename", {
          token: tenant.writeToken,
          query: q({ row_id: rowIds[0]!, field_id: fieldId }),
          body: { file_name: fileName },
        });
        expectValidation(response, [{ key: "file_name", source: "body" }]);
      }
    });
  });
});

describe("upload file names", () => {
  /** A multipart body written by hand, so the part's filename arrives exactly as an attacker sends it. */
  function multipart(fileName: string) {
    const boundary = "----security-boundary";
    const body = Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${fileName}"\r\n` +
          "Content-Type: image/png\r\n\r\n",
      ),
      PNG,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    return { body, type: `multipart/form-data; boundary=${boundary}` };
  }

  it.each([
    ["a traversal", "../../../../etc/passwd", "passwd"],
    ["a Windows path", "C:\\Windows\\..\\evil.png", "evil.png"],
    ["a quote and a parameter", "a\\\"; filename*=UTF-8''evil.html", undefined],
    ["a bare parent directory", "..", "file"],
    ["a traversal to nothing", "../../..", "file"],
    ["a directory", "uploads/", "file"],
  ])(
    "%s is reduced to a label and served in a header it cannot break",
    async (_what, sent, stored) => {
      const rowId = rowIds[4]!;
      const { body, type } = multipart(sent);
      const response = await fetch(
        new URL(`/file/upload?${pair(rowId, fieldId)}`, ctx.sys.baseUrl),
        {
          method: "POST",
          headers: { authorization: `Bearer ${tenant.writeToken}`, "content-type": type },
          body,
        },
      );
      const uploaded = (await response.json()) as { data: { file: { file_name: string } } };
      expect(response.status, JSON.stringify(uploaded)).toBe(200);
      const name = uploaded.data.file.file_name;
      if (stored) expect(name).toBe(stored);
      expect(name).not.toMatch(/[/\\]/);
      await ctx.state.unchanged(
        async () => {
          const served = await raw(ctx.sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
            token: tenant.readToken,
          });
          expect(served.status).toBe(200);
          const disposition = served.headers.get("content-disposition")!;
          expect(disposition).toMatch(
            /^(inline|attachment); filename="[\x20-\x7e]*"; filename\*=UTF-8''[A-Za-z0-9!#$&+\-.^_`|~%]+$/,
          );
          expect(disposition.match(/filename="([^"]*)"/)![1]).not.toMatch(/["\\;%/]/);
          const exact = decodeURIComponent(
            /; filename\*=UTF-8''([^;"\s]+)$/.exec(disposition)![1]!,
          );
          expect(exact).toBe(name);
        },
        {
          counters: {
            [`api-calls:${tenant.orgId}`]: 1,
            [`transfer:${tenant.orgId}`]: PNG.length,
          },
        },
      );
    },
  );
});

describe("active content uploaded as image/png", () => {
  const HTML = Buffer.from("<!DOCTYPE html><html><body><script>alert(document.cookie)</script>");
  const SVG = Buffer.from(
    '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>',
  );

  it.each([
    ["HTML", HTML, /^text\/html/, 1],
    ["SVG", SVG, /^image\/svg\+xml/, 2],
  ] as const)("%s is stored as what it is and served inert", async (_what, bytes, type, index) => {
    const rowId = rowIds[index]!;
    const uploaded = await raw(ctx.sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(bytes, "cat.png", "image/png"),
    });
    expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
    expect(uploaded.json.data.file.content_type).toMatch(type);
    expect(uploaded.json.data.file.content_type).not.toMatch(/^image\/png/);
    // Serving it changes nothing but the organization's call and transfer counters.
    await ctx.state.unchanged(
      async () => {
        const served = await raw(ctx.sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
          token: tenant.readToken,
        });
        expect(served.status).toBe(200);
        expect(served.bytes.equals(bytes)).toBe(true);
        expect(served.headers.get("content-type")).toMatch(type);
        expect(served.headers.get("content-disposition")).toMatch(/^attachment; /);
        expect(served.headers.get("x-content-type-options")).toBe("nosniff");
        expect(served.headers.get("content-security-policy")).toMatch(/default-src 'none'/);
        expect(served.headers.get("content-security-policy")).toMatch(/sandbox/);
      },
      {
        counters: {
          [`api-calls:${tenant.orgId}`]: 1,
          [`transfer:${tenant.orgId}`]: bytes.length,
        },
      },
    );
  });
});

describe("signed URLs", () => {
  let expiresAt = 0;
  async function signedPath(rowId = rowIds[0]!, download = false) {
    const link = await ctx.api("GET", "/file/url", {
      token: tenant.readToken,
      query: q({ row_id: rowId, field_id: fieldId, ...(download ? { download: "true" } : {}) }),
    });
    expect(link.status, JSON.stringify(link.body)).toBe(200);
    expiresAt = Date.parse(link.body.data.expires_at);
    return new URL(link.body.data.url).pathname;
  }
  /** A refusal proves nothing about tampering once the link has expired anyway. */
  const expectUnexpired = () =>
    expect(Date.now(), "the link was still valid when it was tried").toBeLessThan(expiresAt - 250);
  const tokenOf = (path: string) => decodeURIComponent(path.split("/").pop()!);
  const payloadOf = (token: string) => Buffer.from(token.split(".")[0]!, "base64url").toString();
  const withPayload = (token: string, payload: string) =>
    `/file/signed/${Buffer.from(payload).toString("base64url")}.${token.split(".")[1]}`;

  const TAMPERINGS: [string, (token: string) => string][] = [
    [
      "a later expiry with the old signature",
      (token) =>
        withPayload(
          token,
          payloadOf(token).replace(
            /:(\d+):([01])$/,
            (_m, exp, d) => `:${Number(exp) + 86_400}:${d}`,
          ),
        ),
    ],
    [
      "another record's id with the old signature",
      (token) => withPayload(token, payloadOf(token).replace(/^v1:(\d+):/, `v1:${rowIds[1]}:`)),
    ],
    [
      "inline instead of download with the old signature",
      (token) => withPayload(token, payloadOf(token).replace(/:1$/, ":0")),
    ],
    [
      "one character of the signature changed",
      (token) => {
        const [payload, signature] = token.split(".") as [string, string];
        const flipped = signature[0] === "A" ? `B${signature.slice(1)}` : `A${signature.slice(1)}`;
        return `/file/signed/${payload}.${flipped}`;
      },
    ],
    [
      "the last signature character spelled another way (same bytes)",
      (token) => {
        const [payload, signature] = token.split(".") as [string, string];
        const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        const last = alphabet.indexOf(signature.at(-1)!);
        const sibling = alphabet[last ^ 1]!; // differs only in the unused low bits
        return `/file/signed/${payload}.${signature.slice(0, -1)}${sibling}`;
      },
    ],
    ["no signature", (token) => `/file/signed/${token.split(".")[0]}`],
    ["path traversal in the token", () => "/file/signed/..%2F..%2Fetc%2Fpasswd"],
  ];

  it.each(TAMPERINGS)("%s: 404 file_not_found, no byte moves", async (_what, tamper) => {
    const path = tamper(tokenOf(await signedPath(rowIds[0]!, true)));
    await ctx.state.unchanged(async () => {
      expectUnexpired();
      const response = await raw(ctx.sys.baseUrl, "GET", path);
      expectError(asResponse(response), 404, "file_not_found");
    });
  });

  it("an expired URL: 404 file_not_found, no byte moves", async () => {
    const path = await signedPath();
    const fresh = await raw(ctx.sys.baseUrl, "GET", path);
    expect(fresh.status).toBe(200);
    await sleep(URL_TTL_SECONDS * 1000 + 1_100);
    await ctx.state.unchanged(async () => {
      expectError(asResponse(await raw(ctx.sys.baseUrl, "GET", path)), 404, "file_not_found");
    });
  });

  it("a URL of a deleted file stays dead after a restore", async () => {
    const rowId = rowIds[3]!;
    const uploaded = await raw(ctx.sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "gone.png", "image/png"),
    });
    expect(uploaded.status).toBe(200);
    const path = await signedPath(rowId);
    for (const step of ["delete", "restore"]) {
      const response = await ctx.api("POST", `/file/${step}`, {
        token: tenant.writeToken,
        query: q({ row_id: rowId, field_id: fieldId }),
      });
      expect(response.status).toBe(200);
    }
    await ctx.state.unchanged(async () => {
      expectUnexpired();
      expectError(asResponse(await raw(ctx.sys.baseUrl, "GET", path)), 404, "file_not_found");
    });
  });
});

describe("links and files of deleted records", () => {
  it("a signed URL and the serve route die with the record", async () => {
    const { table, fieldId: field, rowIds: rows } = await fileTable(ctx.api, tenant, 1);
    const rowId = rows[0]!;
    const uploaded = await raw(ctx.sys.baseUrl, "POST", `/file/upload?${pair(rowId, field)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "doomed.png", "image/png"),
    });
    expect(uploaded.status).toBe(200);
    const link = await ctx.api("GET", "/file/url", {
      token: tenant.readToken,
      query: q({ row_id: rowId, field_id: field }),
    });
    const signed = new URL(link.body.data.url).pathname;
    const removed = await ctx.api(
      "DELETE",
      `/public/v1/databases/${table.databaseId}/tables/${table.tableId}/records/${rowId}`,
      { token: tenant.writeToken },
    );
    expect(removed.status).toBe(200);
    const expires = Date.parse(link.body.data.expires_at);
    await ctx.state.unchanged(
      async () => {
        expect(Date.now(), "the link was still valid when it was tried").toBeLessThan(
          expires - 250,
        );
        expectError(asResponse(await raw(ctx.sys.baseUrl, "GET", signed)), 404, "file_not_found");
        const served = await raw(ctx.sys.baseUrl, "GET", `/file/serve?${pair(rowId, field)}`, {
          token: tenant.readToken,
        });
        expectError(asResponse(served), 404, "record_not_found");
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 1 } },
    );
  });
  it("a deleted record's files stop counting at once, and no route brings them back", async () => {
    const small = await createTenant(ctx.sys, ctx.api);
    ctx.state.track(small.orgId);
    await enterprise(ctx.sys, small, { "file-storage-bytes": 50_000, "max-file-bytes": 40_000 });
    const { table, fieldId: field, rowIds: rows } = await fileTable(ctx.api, small, 2);
    const [doomed, kept] = rows as [number, number];
    const upload = (rowId: number) =>
      raw(ctx.sys.baseUrl, "POST", `/file/upload?${pair(rowId, field)}`, {
        token: small.writeToken,
        body: filePart(randomBytes(30_000), `${rowId}.bin`),
      });
    expect((await upload(doomed)).status).toBe(200);
    expectError(asResponse(await upload(kept)), 403, "storage_limit_exceeded");
    const removed = await ctx.api(
      "DELETE",
      `/public/v1/databases/${table.databaseId}/tables/${table.tableId}/records/${doomed}`,
      { token: small.writeToken },
    );
    expect(removed.status).toBe(200);
    await expect.poll(() => storageUsage(ctx.sys, small), { timeout: 10_000 }).toBe(0);
    await ctx.state.unchanged(
      async () => {
        for (const route of ["/file/restore", "/file/delete", "/file/rename"]) {
          const response = await ctx.api("POST", route, {
            token: small.writeToken,
            query: q({ row_id: doomed, field_id: field }),
            ...(route === "/file/rename" ? { body: { file_name: "back.bin" } } : {}),
          });
          expectError(response, 404, "record_not_found");
        }
        expectError(asResponse(await upload(doomed)), 404, "record_not_found");
      },
      { counters: { [`api-calls:${small.orgId}`]: 4 } },
    );
    expect((await upload(kept)).status).toBe(200);
  });
});

describe("field ids on the pair routes", () => {
  /** Every pair route with `field` as field_id on the record that holds the kept file. */
  const pairCalls = (field: number) =>
    [
      ["POST", `/file/upload?${pair(rowIds[0]!, field)}`, filePart(PNG, "x.png", "image/png")],
      ["GET", `/file/serve?${pair(rowIds[0]!, field)}`],
      ["GET", `/file/url?${pair(rowIds[0]!, field)}`],
      ["POST", `/file/rename?${pair(rowIds[0]!, field)}`, JSON.stringify({ file_name: "y.png" })],
      ["POST", `/file/delete?${pair(rowIds[0]!, field)}`],
      ["POST", `/file/restore?${pair(rowIds[0]!, field)}`],
    ] as const;

  async function answersTo(field: number) {
    const answers: { route: string; status: number; body: unknown }[] = [];
    for (const [method, route, body] of pairCalls(field)) {
      const response = await raw(ctx.sys.baseUrl, method, route, {
        token: tenant.writeToken,
        ...(body === undefined ? {} : { body }),
        ...(typeof body === "string" ? { headers: { "content-type": "application/json" } } : {}),
      });
      answers.push({ route: route.split("?")[0]!, status: response.status, body: response.json });
    }
    return answers;
  }

  const expectAll = (
    answers: { route: string; status: number; body: unknown }[],
    status: number,
    code: string,
  ) => {
    for (const answer of answers) {
      expect(answer).toEqual({ route: answer.route, status, body: { message: code, data: {} } });
    }
  };

  /** Six calls that got past validation, each one API call of the organization. */
  const sixCalls = () => ({ counters: { [`api-calls:${tenant.orgId}`]: 6 } });

  it("a field id of no field: 404 field_not_found on every pair route, nothing changes", async () => {
    await ctx.state.unchanged(async () => {
      expectAll(await answersTo(987_654_321), 404, "field_not_found");
    }, sixCalls());
  });

  it("another organization's file field: the same 404 as no field at all, nothing changes", async () => {
    const other = await createTenant(ctx.sys, ctx.api);
    const foreign = await fileTable(ctx.api, other, 1);
    await ctx.state.unchanged(
      async () => {
        const answers = await answersTo(foreign.fieldId);
        expectAll(answers, 404, "field_not_found");
        expect(answers).toEqual(await answersTo(987_654_321));
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 12 } },
    );
  });

  it("a text field or another table's file field of the organization: 400 field_not_file_type", async () => {
    const sibling = await fileTable(ctx.api, tenant, 1);
    await ctx.state.unchanged(
      async () => {
        expectAll(await answersTo(sibling.textFieldId), 400, "field_not_file_type");
        expectAll(await answersTo(sibling.fieldId), 400, "field_not_file_type");
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 12 } },
    );
  });
});

describe("parallel uploads racing the storage limit", () => {
  it("never pass it, and once full an upload changes nothing", async () => {
    const small = await createTenant(ctx.sys, ctx.api);
    ctx.state.track(small.orgId);
    await enterprise(ctx.sys, small, { "file-storage-bytes": 100_000, "max-file-bytes": 60_000 });
    const { fieldId: field, rowIds: rows } = await fileTable(ctx.api, small, 9);
    const size = 30_000;
    const results = await Promise.all(
      rows.slice(0, 8).map((rowId) =>
        raw(ctx.sys.baseUrl, "POST", `/file/upload?${pair(rowId, field)}`, {
          token: small.writeToken,
          body: filePart(randomBytes(size), `${rowId}.bin`),
        }),
      ),
    );
    const stored = results.filter((r) => r.status === 200).length;
    expect(stored).toBeGreaterThanOrEqual(1);
    expect(stored).toBeLessThanOrEqual(3);
    for (const result of results.filter((r) => r.status !== 200)) {
      expectError(asResponse(result), 403, "storage_limit_exceeded");
    }
    expect(await storageUsage(ctx.sys, small)).toBe(stored * size);

    const free = 100_000 - stored * size;
    await ctx.state.unchanged(
      async () => {
        const refused = await raw(
          ctx.sys.baseUrl,
          "POST",
          `/file/upload?${pair(rows[8]!, field)}`,
          {
            token: small.writeToken,
            body: filePart(randomBytes(free + 1), "one-too-many.bin"),
          },
        );
        expectError(asResponse(refused), 403, "storage_limit_exceeded");
      },
      { counters: { [`api-calls:${small.orgId}`]: 1 } },
    );
    expect(await storageUsage(ctx.sys, small)).toBe(stored * size);
  });
});
