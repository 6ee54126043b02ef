import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  contractProblem,
  DESTRUCTIVE,
  describeFailure,
  nameOf,
  type Operation,
  operationsOf,
  requestArbitrary,
  send,
} from "./support/requests.js";
import type { JsonSchema } from "./support/schema-arbitrary.js";
import { buildWorld, type World } from "./support/world.js";

// Every route of the gateway's own /openapi.json, fed requests generated from its schemas
// (aimed at a real organization, database, table, records and file most of the time) and
// mutations of them, through the whole running system. Whatever comes in, the answer is never
// a 5xx and always JSON in one of the envelopes (success, domain error, validation error).
//
// Reproduce a failure with the seed it prints: FUZZ_SEED=<seed> npx vitest run test/fuzz.
// FUZZ_SCALE=<n> multiplies every route's runs (for a longer local hunt).

const SCALE = Number(process.env.FUZZ_SCALE ?? 1);
const CONCURRENCY = 3;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

/** Route families, in the order they run; the destructive routes come last, on their own. */
const FAMILIES: { name: string; runs: number; match: (op: Operation) => boolean }[] = [
  {
    name: "health and docs",
    runs: 20,
    match: (op) => /^\/(health|docs|openapi\.json)/.test(op.path),
  },
  { name: "accounts", runs: 30, match: (op) => /^\/(auth|oauth)\//.test(op.path) },
  { name: "organizations", runs: 30, match: (op) => op.path.startsWith("/organization/") },
  { name: "API tokens", runs: 50, match: (op) => op.path.startsWith("/api_token/") },
  { name: "databases", runs: 50, match: (op) => op.path.startsWith("/database/") },
  { name: "tables", runs: 50, match: (op) => op.path.startsWith("/table/") },
  { name: "fields", runs: 60, match: (op) => op.path.startsWith("/field/") },
  { name: "forms", runs: 60, match: (op) => /^\/forms?\//.test(op.path) },
  { name: "audit", runs: 80, match: (op) => op.path.startsWith("/audit/") },
  { name: "records (v1)", runs: 100, match: (op) => op.path.startsWith("/public/v1/") },
  { name: "records (query form)", runs: 100, match: (op) => op.path.startsWith("/public/record/") },
  { name: "files", runs: 50, match: (op) => op.path.startsWith("/file/") },
  { name: "webhooks", runs: 50, match: (op) => op.path.startsWith("/webhook/") },
  { name: "MCP", runs: 30, match: (op) => op.path === "/mcp" },
];

let world: World;
let operations: Operation[] = [];
let document: JsonSchema;
const covered = new Map<string, number>();
/** Answers by status (and error code) per route, printed with FUZZ_STATS=1 to see how deep runs go. */
const stats = new Map<string, Map<string, number>>();

beforeAll(async () => {
  world = await buildWorld();
  const response = await fetch(new URL("/openapi.json", world.sys.baseUrl));
  expect(response.status).toBe(200);
  document = (await response.json()) as JsonSchema;
  operations = operationsOf(document);
}, 120_000);

afterAll(async () => {
  await world?.stop();
  if (process.env.FUZZ_STATS) {
    for (const [route, statuses] of stats)
      process.stdout.write(`${route} ${JSON.stringify(Object.fromEntries(statuses))}\n`);
  }
});

async function fuzz(op: Operation, runs: number): Promise<void> {
  const numRuns = Math.max(1, Math.round(runs * SCALE));
  await fc.assert(
    fc.asyncProperty(requestArbitrary(op, world, document), async (request) => {
      const started = performance.now();
      const response = await send(world, request);
      const took = performance.now() - started;
      const problem = contractProblem(op, response, request.url);
      if (process.env.FUZZ_STATS) {
        const counts = stats.get(nameOf(op)) ?? new Map<string, number>();
        const code = /"message":"([a-z_]+)"/.exec(response.text)?.[1] ?? "";
        const key = `${response.status}${code && code !== "success" ? ` ${code}` : ""}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
        counts.set("ms", Math.round((counts.get("ms") ?? 0) + took));
        counts.set("max ms", Math.round(Math.max(counts.get("max ms") ?? 0, took)));
        stats.set(nameOf(op), counts);
      }
      if (problem) throw new Error(describeFailure(request, response, problem));
    }),
    { numRuns, seed: SEED, endOnFailure: true },
  );
  covered.set(nameOf(op), numRuns);
}

function family(destructive: boolean) {
  for (const f of FAMILIES) {
    it(`${f.name}${destructive ? " (destructive routes)" : ""}`, async () => {
      const mine = operations.filter(
        (op) => f.match(op) && DESTRUCTIVE.has(nameOf(op)) === destructive,
      );
      // A few routes at a time: each request mostly waits on PostgreSQL, mail and the network.
      const queue = [...mine];
      const worker = async () => {
        // The destructive routes soon run out of things to destroy; fewer runs do as much.
        const runs = destructive ? Math.min(f.runs, 50) : f.runs;
        for (let op = queue.shift(); op; op = queue.shift()) await fuzz(op, runs);
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    }, 300_000);
  }
}

describe("every gateway route under fuzzed requests", () => {
  family(false);
  family(true);

  it("answers other methods and unknown paths with the error envelope", async () => {
    const documented = new Set(operations.map(nameOf));
    const paths = [...new Set(operations.map((op) => op.path))];
    const path = fc.oneof(
      fc
        .constantFrom(...paths)
        .map((p) => p.replace(/\{(\w+)\}/g, (_, name: string) => (name === "token" ? "x" : "1"))),
      fc
        .array(
          fc.oneof(fc.constantFrom("public", "v1", "records", "..", "%2e", "%ZZ", ""), fc.string()),
          {
            maxLength: 5,
          },
        )
        .map(
          (parts) =>
            `/${parts.map((p) => (p.startsWith("%") ? p : encodeURIComponent(p))).join("/")}`,
        ),
    );
    const method = fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS");
    await fc.assert(
      fc.asyncProperty(method, path, async (m, url) => {
        const templated = operations.find(
          (op) =>
            op.method === m && new RegExp(`^${op.path.replace(/\{\w+\}/g, "[^/]+")}$`).test(url),
        );
        if (templated && documented.has(nameOf(templated))) return;
        const op: Operation = { method: m, path: url, spec: {} };
        const response = await send(world, { method: m, url, credential: "owner", headers: {} });
        // OPTIONS on a known path answers what it allows, without a body (RFC 9110 9.3.7).
        if (m === "OPTIONS" && response.status === 204) return;
        const problem = contractProblem(op, response, url);
        if (problem || response.status < 400) {
          throw new Error(
            describeFailure(
              { method: m, url, credential: "owner", headers: {} },
              response,
              problem ?? "success",
            ),
          );
        }
      }),
      { numRuns: Math.round(150 * SCALE), seed: SEED, endOnFailure: true },
    );
  });

  it("stores text and JSON values as sent, or refuses them with 400", async () => {
    // What the contract checks cannot see: a value the gateway accepts but the services store
    // differently (an unpaired surrogate once came back as U+FFFD).
    const t = world.table;
    const path = `/public/v1/databases/${t.databaseId}/tables/${t.tableId}/records`;
    const text = fc.oneof(
      fc.string({ unit: "binary", maxLength: 20 }),
      fc.constantFrom("\ud800", "a\udfff", "\u0000", "\u202e", "é", "\r\n", " x "),
    );
    const json = fc.jsonValue({ maxDepth: 3 });
    await fc.assert(
      fc.asyncProperty(text, json, async (value, meta) => {
        const response = await send(world, {
          method: "POST",
          url: path,
          credential: "write",
          headers: {},
          body: { text: JSON.stringify({ data: { Text: value, Meta: meta } }) },
        });
        const body = JSON.parse(response.text);
        if (response.status === 400) return;
        expect(response.status, response.text).toBe(200);
        const data = body.data.record.data;
        // Text is kept as sent; JSON too, but for -0, which JSON has no way to keep.
        const sent = JSON.parse(JSON.stringify(meta));
        expect(value === "" ? [null, ""] : [value]).toContain(data[t.id("Text")]);
        expect(data[t.id("Meta")]).toEqual(sent);
      }),
      { numRuns: Math.round(60 * SCALE), seed: SEED, endOnFailure: true },
    );
  });

  it("covered every operation of /openapi.json", () => {
    const missing = operations.map(nameOf).filter((name) => !covered.has(name));
    expect(missing).toEqual([]);
    expect(operations.length).toBeGreaterThan(60);
  });
});
