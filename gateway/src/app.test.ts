import net from "node:net";
import { gzipSync } from "node:zlib";
import { createLogger, createServiceClient, MemoryBus, MemoryCache } from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { Validator } from "@seriousme/openapi-schema-validator";
import { SignJWT, UnsecuredJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGateway, type GatewayDeps } from "./app.js";
import { loadGatewayConfig } from "./config.js";
import { JSON_BODY_LIMIT_BYTES } from "./http/json-body.js";
import { type RunningGateway, startGateway } from "./start-gateway.js";

/**
 * The gateway over real HTTP on a free port. No service runs behind it: the identity,
 * organization, catalog and records URLs point at closed ports, so everything decided before a service call is tested here, and a call
 * shows how an unreachable service is answered. Flows through the running system are the
 * e2e tests' job.
 */

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** What the router keeps of each route it serves. */
interface RouterLayer {
  path: string;
  methods: string[];
}

interface TestGateway {
  url: string;
  running: RunningGateway;
}

/** What the gateway runs on: services behind closed ports, an in-memory cache and bus. */
async function gatewayDeps(env: Record<string, string> = {}): Promise<GatewayDeps> {
  const identityUrl = `http://127.0.0.1:${await closedPort()}`;
  const organizationUrl = `http://127.0.0.1:${await closedPort()}`;
  const catalogUrl = `http://127.0.0.1:${await closedPort()}`;
  const recordsUrl = `http://127.0.0.1:${await closedPort()}`;
  const filesUrl = `http://127.0.0.1:${await closedPort()}`;
  const config = loadGatewayConfig({
    IDENTITY_GRPC_URL: identityUrl,
    ORGANIZATION_GRPC_URL: organizationUrl,
    CATALOG_GRPC_URL: catalogUrl,
    RECORDS_GRPC_URL: recordsUrl,
    FILES_GRPC_URL: filesUrl,
    INTERNAL_JWT_SECRET: "test-secret-test-secret-test-secret",
    LOG_LEVEL: "silent",
    ...env,
  });
  return {
    config,
    logger: createLogger("gateway", "silent"),
    cache: new MemoryCache(),
    bus: new MemoryBus(createLogger("bus", "silent")),
    identity: createServiceClient(IdentityService, identityUrl),
    organization: createServiceClient(OrganizationService, organizationUrl),
    catalog: createServiceClient(CatalogService, catalogUrl),
    records: createServiceClient(RecordsService, recordsUrl),
    files: createServiceClient(FilesService, filesUrl),
    healthTargets: [
      { name: "identity", url: identityUrl },
      { name: "organization", url: organizationUrl },
      { name: "catalog", url: catalogUrl },
      { name: "records", url: recordsUrl },
      { name: "files", url: filesUrl },
    ],
  };
}

async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const running = await startGateway(await gatewayDeps(env), { port: 0, host: "127.0.0.1" });
  return { url: `http://127.0.0.1:${running.port}`, running };
}

async function call(
  gw: TestGateway,
  path: string,
  init: RequestInit & { json?: unknown } = {},
): Promise<{ status: number; headers: Headers; body: unknown; text: string }> {
  const { json, ...rest } = init;
  const response = await fetch(gw.url + path, {
    ...rest,
    ...(json !== undefined
      ? {
          body: JSON.stringify(json),
          headers: { "content-type": "application/json", ...rest.headers },
        }
      : {}),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, headers: response.headers, body, text };
}

/** Sends raw bytes to the gateway and reads its answer until it closes the connection. */
async function exchange(gw: TestGateway, bytes: string): Promise<string> {
  const socket = net.connect(Number(new URL(gw.url).port), "127.0.0.1");
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(bytes);
  await new Promise((resolve) => socket.once("close", resolve));
  return Buffer.concat(chunks).toString("utf8");
}

/** A raw answer's status, headers (names in lower case) and JSON body. */
function parsed(answer: string): {
  status: number;
  headers: Map<string, string>;
  body: unknown;
} {
  const [head = "", body = ""] = answer.split("\r\n\r\n");
  const [statusLine = "", ...lines] = head.split("\r\n");
  const headers = new Map(
    lines.map((line) => {
      const colon = line.indexOf(":");
      return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()] as const;
    }),
  );
  return { status: Number(statusLine.split(" ")[1]), headers, body: body && JSON.parse(body) };
}

const validation = (method: string, path: string, extra: unknown[]) => ({
  status_code: 400,
  detail: `Validation failed for ${method} ${path}`,
  extra,
});

describe("the gateway over HTTP", () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await gateway({ RATE_LIMITS: "off" });
  });

  afterAll(async () => {
    await gw.running.close();
  });

  describe("request ids", () => {
    it("echoes a sane X-Request-Id and generates one otherwise", async () => {
      const echoed = await call(gw, "/health", { headers: { "x-request-id": "trace-123.abc" } });
      expect(echoed.headers.get("x-request-id")).toBe("trace-123.abc");
      const generated = await call(gw, "/health");
      expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      const insane = await call(gw, "/health", { headers: { "x-request-id": "a b<script>" } });
      expect(insane.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      const long = await call(gw, "/health", { headers: { "x-request-id": "x".repeat(200) } });
      expect(long.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    });

    it("is on error responses too", async () => {
      const missing = await call(gw, "/nowhere", { headers: { "x-request-id": "req-404" } });
      expect(missing.status).toBe(404);
      expect(missing.headers.get("x-request-id")).toBe("req-404");
    });

    it("comes with no-store and nosniff, unless a route says otherwise", async () => {
      for (const path of ["/health", "/nowhere", "/health/ready"]) {
        const response = await call(gw, path);
        expect(response.headers.get("cache-control"), path).toBe("no-store");
        expect(response.headers.get("x-content-type-options"), path).toBe("nosniff");
      }
      const asset = await call(gw, "/docs/initializer.js");
      expect(asset.headers.get("cache-control")).toBe("public, max-age=3600");
    });
  });

  describe("routing", () => {
    it("answers an unknown route 404 not_found", async () => {
      const response = await call(gw, "/no/such/route", { method: "POST" });
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ message: "not_found", data: {} });
    });

    it("answers a known path with the wrong method 405 method_not_allowed with Allow", async () => {
      for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
        const response = await call(gw, "/auth/login", { method });
        expect(response.status).toBe(405);
        expect(response.body).toEqual({ message: "method_not_allowed", data: {} });
        expect(response.headers.get("allow")).toBe("POST, OPTIONS");
      }
      const current = await call(gw, "/auth/current", { method: "POST" });
      expect(current.status).toBe(405);
      expect(current.headers.get("allow")).toBe("HEAD, GET, OPTIONS");
    });

    it("matches paths exactly: another case or a trailing slash is an unknown route", async () => {
      const v1 = "/public/v1/databases/1/tables/2/records";
      for (const [method, path] of [
        ["GET", "/ORGANIZATION/LIST"],
        ["GET", "/Organization/list"],
        ["GET", "/organization/list/"],
        ["POST", "/auth/login/"],
        ["PUT", "/auth/Login"],
        ["GET", "/health/"],
        ["GET", "/HEALTH"],
        ["GET", "/docs/"],
        ["GET", "/openapi.json/"],
        ["GET", "/OpenAPI.json"],
        ["GET", `${v1}/7/`],
        ["GET", `${v1.toUpperCase()}/7`],
        ["GET", "/file/signed/abc/"],
        ["GET", "/FILE/signed/abc"],
      ] as const) {
        const response = await call(gw, path, { method, json: method === "GET" ? undefined : {} });
        expect({ method, path, status: response.status, body: response.body }).toEqual({
          method,
          path,
          status: 404,
          body: { message: "not_found", data: {} },
        });
      }
      for (const path of ["/health", "/docs", "/openapi.json", "/docs/initializer.js"]) {
        expect({ path, status: (await call(gw, path)).status }).toEqual({ path, status: 200 });
      }
      const unauthenticated = await call(gw, "/organization/list");
      expect(unauthenticated.status).toBe(401);
    });

    it("reads a percent-encoded unreserved character as the character", async () => {
      const v1 = "/public/v1/databases/1/tables/2/records";
      for (const path of [`${v1}/%37`, `${v1}/1%30`, "/organization/%6Cist", "/auth/%63urrent"]) {
        const response = await call(gw, path);
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 401,
          body: { message: "unauthorized", data: {} },
        });
      }
      for (const path of ["/h%65alth", "/docs/%69nitializer.js"]) {
        expect({ path, status: (await call(gw, path)).status }).toEqual({ path, status: 200 });
      }
      // A record id that is no integer still names the record route, which asks for a
      // credential before it reads its parameters (and then refuses the id with a 400).
      for (const path of [`${v1}/%2e%2e`, `${v1}/7%2F8`, `${v1}/%00`]) {
        const response = parsed(
          await exchange(gw, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`),
        );
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 401,
          body: { message: "unauthorized", data: {} },
        });
      }
      // Another segment or a byte no route takes: no route, never a 500.
      for (const path of [
        `${v1}/%2e%2e/8`,
        "/health%2Fready",
        "/docs/%2e%2e%2Fpackage.json",
        "/docs/%2e%2e%2F%2e%2e%2Fpackage.json",
        "/docs/swagger-ui.css%00",
      ]) {
        const response = parsed(
          await exchange(gw, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`),
        );
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 404,
          body: { message: "not_found", data: {} },
        });
      }
    });

    it("answers PUT on the v1 record paths 405, and keeps /records/batch apart", async () => {
      const v1 = "/public/v1/databases/1/tables/2/records";
      for (const path of [v1, `${v1}/7`]) {
        const response = await call(gw, path, { method: "PUT", json: { data: {} } });
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 405,
          body: { message: "method_not_allowed", data: {} },
        });
      }
      const batch = await call(gw, `${v1}/batch`, { method: "GET" });
      expect(batch.status).toBe(405);
      expect(batch.headers.get("allow")).toBe("POST, PATCH, OPTIONS");
      const unauthenticated = await call(gw, `${v1}/7`, { method: "GET" });
      expect(unauthenticated.status).toBe(401);
      expect(unauthenticated.body).toEqual({ message: "unauthorized", data: {} });
      const queryForm = await call(gw, "/public/record/list?database_id=1&table_id=2");
      expect(queryForm.status).toBe(401);
    });

    it("answers any method no route takes in the envelope, over a raw socket", async () => {
      const request = (line: string, headers = "Host: x\r\n") =>
        exchange(gw, `${line}\r\n${headers}Connection: close\r\n\r\n`);
      for (const [line, status, code, allow] of [
        ["PROPFIND /auth/login HTTP/1.1", 405, "method_not_allowed", "POST, OPTIONS"],
        ["TRACE /file/url HTTP/1.1", 405, "method_not_allowed", "HEAD, GET, OPTIONS"],
        ["MKCOL /health HTTP/1.1", 405, "method_not_allowed", "HEAD, GET, OPTIONS"],
        ["TRACE /nowhere HTTP/1.1", 404, "not_found", undefined],
        ["OPTIONS /nowhere HTTP/1.1", 404, "not_found", undefined],
        ["OPTIONS * HTTP/1.1", 404, "not_found", undefined],
        // Node's parser knows no FOO, and Node hands CONNECT over as a bare socket.
        ["FOO /auth/login HTTP/1.1", 405, "method_not_allowed", undefined],
        ["CONNECT example.com:443 HTTP/1.1", 405, "method_not_allowed", undefined],
      ] as const) {
        const answer = parsed(await request(line));
        expect({ line, status: answer.status, body: answer.body }).toEqual({
          line,
          status,
          body: { message: code, data: {} },
        });
        expect(answer.headers.get("x-request-id"), line).toMatch(/^[0-9a-f-]{36}$/);
        expect(answer.headers.get("allow"), line).toBe(allow);
      }
      const malformed = parsed(
        await request("GET /health HTTP/1.1", "Host: x\r\nBad Header: y\r\n"),
      );
      expect(malformed.status).toBe(400);
      expect(malformed.body).toEqual({ message: "malformed_request", data: {} });
      expect(malformed.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      const hostless = parsed(await request("GET /health HTTP/1.1", ""));
      expect(hostless.status).toBe(400);
      expect(hostless.body).toEqual(
        validation("GET", "/health", [
          { key: "host", message: "is required", source: "header", code: "required" },
        ]),
      );
      expect(hostless.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      expect(parsed(await request("GET /health HTTP/1.0", "")).status).toBe(200);
    });

    it("closes the connection of a refusal whose body is still arriving, and only then", async () => {
      // An upload refused before its body is read: keeping the connection would mean reading
      // the rest of it (here a megabyte that never comes) for nothing.
      const refused = parsed(
        await exchange(
          gw,
          "POST /file/upload?row_id=1 HTTP/1.1\r\nHost: x\r\n" +
            "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000000\r\n\r\n",
        ),
      );
      expect(refused.status).toBe(401);
      expect(refused.headers.get("connection")).toBe("close");
      // A refusal whose whole body arrived keeps the connection for the next request.
      const response = await fetch(`${gw.url}/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(response.status).toBe(400);
      expect(response.headers.get("connection")).not.toBe("close");
    });

    it("refuses a header that must come once and came twice, naming it", async () => {
      const request = (line: string, headers: string, body = "") =>
        exchange(gw, `${line}\r\nHost: x\r\n${headers}Connection: close\r\n\r\n${body}`);
      const jwt = `Bearer ${"e30".repeat(3)}`;
      const token = `Bearer rb_${"a".repeat(40)}`;
      for (const [line, headers, body, key] of [
        ["GET /auth/current HTTP/1.1", `Authorization: ${jwt}\r\nAuthorization: ${token}\r\n`],
        ["GET /auth/current HTTP/1.1", `Authorization: ${jwt}\r\nauthorization: ${jwt}\r\n`],
        [
          "GET /public/v1/databases/1/tables/2/records HTTP/1.1",
          `Authorization: ${token}\r\nAuthorization: ${token}\r\n`,
        ],
        ["GET /health HTTP/1.1", "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n"],
        ["GET /health HTTP/1.1", "Host: y\r\n", "", "host"],
        [
          "POST /auth/login HTTP/1.1",
          "Content-Type: application/json\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n",
          "{}",
          "content-type",
        ],
      ] as const) {
        const path = line.split(" ")[1] ?? "";
        const answer = parsed(await request(line, headers, body));
        expect({ line, status: answer.status, body: answer.body }).toEqual({
          line,
          status: 400,
          body: validation(line.split(" ")[0] ?? "", path, [
            {
              key: key ?? "authorization",
              message: "must be sent once",
              source: "header",
              code: "invalid_value",
            },
          ]),
        });
        expect(answer.headers.get("x-request-id"), line).toMatch(/^[0-9a-f-]{36}$/);
      }
      // Node's parser refuses a repeated Content-Length itself, equal or not.
      for (const lengths of ["2", "3"]) {
        const answer = parsed(
          await request(
            "POST /auth/login HTTP/1.1",
            `Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: ${lengths}\r\n`,
            "{}",
          ),
        );
        expect(answer.status).toBe(400);
        expect(answer.body).toEqual({ message: "malformed_request", data: {} });
      }
    });

    it("answers OPTIONS on a known path with Allow", async () => {
      const response = await call(gw, "/auth/login", { method: "OPTIONS" });
      expect(response.status).toBe(204);
      expect(response.headers.get("allow")).toBe("POST, OPTIONS");
    });
  });

  describe("credentials in the query string", () => {
    it("are refused with the validation envelope naming the parameter, on every path", async () => {
      for (const [parameter, path, method] of [
        ["token", "/auth/current", "GET"],
        ["access_token", "/auth/login", "POST"],
        ["api_key", "/health", "GET"],
        ["token", "/no/such/route", "GET"],
      ] as const) {
        const response = await call(gw, `${path}?${parameter}=secret`, { method });
        expect(response.status).toBe(400);
        expect(response.body).toEqual(
          validation(method, path, [
            {
              key: parameter,
              message:
                "credentials are not accepted in the query string; use the Authorization header",
              source: "query",
              code: "invalid_value",
            },
          ]),
        );
      }
    });

    it("are checked before authentication and body validation", async () => {
      const response = await call(gw, "/auth/login?token=x", { method: "POST", body: "{bad" });
      expect((response.body as { extra: { key: string }[] }).extra).toEqual([
        expect.objectContaining({ key: "token", source: "query" }),
      ]);
    });
  });

  describe("body validation", () => {
    it("lists every bad, missing and unknown key with its source", async () => {
      const response = await call(gw, "/auth/register", {
        method: "POST",
        json: { email: "not-an-email", password: "short", name: "  ", admin: true },
      });
      expect(response.status).toBe(400);
      expect(response.body).toEqual(
        validation("POST", "/auth/register", [
          {
            key: "email",
            message: "must be a valid e-mail address",
            source: "body",
            code: "invalid_value",
          },
          {
            key: "password",
            message: "must be 8-128 characters",
            source: "body",
            code: "too_short",
          },
          { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
          { key: "admin", message: "is not allowed", source: "body", code: "unknown_key" },
        ]),
      );
    });

    it("checks each account body by the account rules", async () => {
      const cases: [string, unknown, unknown[]][] = [
        [
          "/auth/register",
          { email: "a@example.com", password: "x".repeat(129), name: "Ann\u0007" },
          [
            {
              key: "password",
              message: "must be 8-128 characters",
              source: "body",
              code: "too_long",
            },
            {
              key: "name",
              message: "must not contain control characters",
              source: "body",
              code: "invalid_value",
            },
          ],
        ],
        [
          "/auth/verify_email",
          { email: "a@example.com", code: "12345a" },
          [{ key: "code", message: "must be 6 digits", source: "body", code: "invalid_value" }],
        ],
        [
          "/auth/resend_code",
          {},
          [{ key: "email", message: "is required", source: "body", code: "required" }],
        ],
        [
          // RFC 5321: at most 64 characters before the '@'.
          "/auth/register",
          { email: `${"a".repeat(65)}@example.com`, password: "12345678" },
          [
            {
              key: "email",
              message: "must have at most 64 characters before the @",
              source: "body",
              code: "too_long",
            },
          ],
        ],
        [
          "/auth/resend_code",
          { email: `${"a".repeat(64)}@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(62)}` },
          [
            {
              key: "email",
              message: "must be at most 254 characters",
              source: "body",
              code: "too_long",
            },
          ],
        ],
        [
          "/auth/login",
          { email: 5, password: "12345678" },
          [{ key: "email", message: "must be a string", source: "body", code: "invalid_type" }],
        ],
        [
          "/auth/refresh",
          { refresh_token: "" },
          [{ key: "refresh_token", message: "is required", source: "body", code: "too_short" }],
        ],
        [
          "/auth/refresh",
          { refresh_token: "r".repeat(201) },
          [
            {
              key: "refresh_token",
              message: "must be at most 200 characters",
              source: "body",
              code: "too_long",
            },
          ],
        ],
      ];
      for (const [path, json, extra] of cases) {
        const response = await call(gw, path, { method: "POST", json });
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 400,
          body: validation("POST", path, extra),
        });
      }
    });

    it("refuses malformed JSON, a wrong content type, a non-object and a missing body", async () => {
      const cases: [RequestInit, unknown[]][] = [
        [
          { body: '{"email": ', headers: { "content-type": "application/json" } },
          [{ key: "body", message: "is not valid JSON", source: "body", code: "invalid_syntax" }],
        ],
        [
          {
            body: "email=a@example.com",
            headers: { "content-type": "application/x-www-form-urlencoded" },
          },
          [
            {
              key: "content-type",
              message: "must be application/json",
              source: "header",
              code: "invalid_value",
            },
          ],
        ],
        [
          { body: "[1,2]", headers: { "content-type": "application/json" } },
          [{ key: "body", message: "must be a JSON object", source: "body", code: "invalid_type" }],
        ],
        [
          { body: '"a string"', headers: { "content-type": "application/json" } },
          [{ key: "body", message: "is not valid JSON", source: "body", code: "invalid_syntax" }],
        ],
        [
          {},
          [
            {
              key: "body",
              message: "a JSON object body is required",
              source: "body",
              code: "required",
            },
          ],
        ],
      ];
      for (const [init, extra] of cases) {
        const response = await call(gw, "/auth/login", { method: "POST", ...init });
        expect(response.status).toBe(400);
        expect(response.body).toEqual(validation("POST", "/auth/login", extra));
      }
    });

    it("lists the first 100 problems and says how many there were", async () => {
      // Short keys, so that 100,000 of them fit in the 1 MiB a JSON body may have.
      const key = (i: number) => `k${i.toString(36)}`;
      const body = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [key(i), 0]));
      const response = await call(gw, "/auth/login?a=1&b=2", { method: "POST", json: body });
      expect(response.status).toBe(400);
      const envelope = response.body as { detail: string; extra: { key: string }[] };
      expect(envelope.detail).toBe(
        "Validation failed for POST /auth/login: the first 100 of 100004 problems are listed",
      );
      expect(envelope.extra).toHaveLength(100);
      // In the order they were found: the query's first, then the body's.
      expect(envelope.extra.slice(0, 5)).toEqual([
        { key: "a", message: "is not allowed", source: "query", code: "unknown_key" },
        { key: "b", message: "is not allowed", source: "query", code: "unknown_key" },
        { key: "email", message: "is required", source: "body", code: "required" },
        { key: "password", message: "is required", source: "body", code: "required" },
        { key: "k0", message: "is not allowed", source: "body", code: "unknown_key" },
      ]);
      expect(envelope.extra.at(-1)).toEqual({
        key: key(95),
        message: "is not allowed",
        source: "body",
        code: "unknown_key",
      });
      expect(response.text.length).toBeLessThan(10_000);
    });

    it("refuses unknown query parameters", async () => {
      const response = await call(gw, "/auth/login?limt=1", {
        method: "POST",
        json: { email: "a@example.com", password: "correct horse" },
      });
      expect(response.status).toBe(400);
      expect(response.body).toEqual(
        validation("POST", "/auth/login", [
          { key: "limt", message: "is not allowed", source: "query", code: "unknown_key" },
        ]),
      );
    });

    it("answers a JSON body over 1 MiB with 413 payload_too_large", async () => {
      const padding = "x".repeat(JSON_BODY_LIMIT_BYTES);
      const response = await call(gw, "/auth/login", {
        method: "POST",
        json: { email: "a@example.com", password: padding },
      });
      expect(response.status).toBe(413);
      expect(response.body).toEqual({ message: "payload_too_large", data: {} });
    });

    it("answers other bodies while clients that declared large bodies send nothing", async () => {
      // Each declares the largest body and stalls: five of them would hold the whole JSON body
      // budget if a body took its share before it arrived.
      const stalled = await Promise.all(
        Array.from({ length: 5 }, async () => {
          const socket = net.connect(Number(new URL(gw.url).port), "127.0.0.1");
          await new Promise((resolve) => socket.once("connect", resolve));
          socket.write(
            `POST /auth/login HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${JSON_BODY_LIMIT_BYTES}\r\n\r\n{`,
          );
          return socket;
        }),
      );
      try {
        const response = await call(gw, "/auth/login", {
          method: "POST",
          json: { email: "not-an-email", password: "12345678" },
        });
        expect(response.status).toBe(400);
        expect(response.body).toEqual(
          validation("POST", "/auth/login", [
            {
              key: "email",
              message: "must be a valid e-mail address",
              source: "body",
              code: "invalid_value",
            },
          ]),
        );
      } finally {
        for (const socket of stalled) socket.destroy();
      }
    });

    it("reads gzip bodies and refuses an unknown content encoding", async () => {
      const json = JSON.stringify({ email: "not-an-email", password: "12345678" });
      const gzipped = await call(gw, "/auth/login", {
        method: "POST",
        body: gzipSync(json),
        headers: { "content-type": "application/json", "content-encoding": "gzip" },
      });
      expect(gzipped.body).toEqual(
        validation("POST", "/auth/login", [
          {
            key: "email",
            message: "must be a valid e-mail address",
            source: "body",
            code: "invalid_value",
          },
        ]),
      );
      const unknown = await call(gw, "/auth/login", {
        method: "POST",
        body: json,
        headers: { "content-type": "application/json", "content-encoding": "zstd-ish" },
      });
      expect(unknown.status).toBe(400);
      expect(unknown.body).toEqual(
        validation("POST", "/auth/login", [
          {
            key: "content-encoding",
            message: "must be gzip, deflate, br or identity",
            source: "header",
            code: "invalid_value",
          },
        ]),
      );
    });

    it("normalises the e-mail before the service is asked (then 503: identity is down)", async () => {
      const response = await call(gw, "/auth/login", {
        method: "POST",
        json: { email: "  Ann@Example.COM ", password: "12345678" },
      });
      expect(response.status).toBe(503);
      expect(response.body).toEqual({ message: "service_unavailable", data: {} });
      // The longest an address and its part before the '@' may be (RFC 5321) are asked about.
      const longest = `${"a".repeat(64)}@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`;
      expect(longest).toHaveLength(254);
      const atLimit = await call(gw, "/auth/login", {
        method: "POST",
        json: { email: ` ${longest.toUpperCase()} `, password: "12345678" },
      });
      expect(atLimit.status).toBe(503);
    });
  });

  describe("authentication", () => {
    it("answers 401 unauthorized without a valid bearer, before looking at the body", async () => {
      const none = new UnsecuredJWT({ sid: "s" }).setIssuer("rowbase").setSubject("1").encode();
      const hs256 = await new SignJWT({ sid: "s" })
        .setProtectedHeader({ alg: "HS256", kid: "k" })
        .setIssuer("rowbase")
        .setSubject("1")
        .setExpirationTime("5m")
        .sign(new TextEncoder().encode("test-secret-test-secret-test-secret"));
      const missing = 'Bearer realm="rowbase", error_description="send a credential';
      const malformed = 'Bearer realm="rowbase", error="invalid_request"';
      const invalid =
        'Bearer realm="rowbase", error="invalid_token", error_description="the session token is malformed';
      // Each refusal says why in WWW-Authenticate; the body is the same.
      const headers: [Record<string, string> | undefined, string][] = [
        [undefined, missing],
        [{ authorization: "" }, missing],
        [{ authorization: "Basic YTpi" }, malformed],
        [{ authorization: "Bearer" }, malformed],
        [{ authorization: "Bearer not-a-jwt" }, invalid],
        [
          { authorization: `Bearer rb_${"a".repeat(40)}` },
          'Bearer realm="rowbase", error="invalid_token", error_description="API tokens are not accepted on this route',
        ],
        [{ authorization: `Bearer ${none}` }, invalid],
        [{ authorization: `Bearer ${hs256}` }, invalid],
      ];
      for (const [header, reason] of headers) {
        for (const [method, path] of [
          ["GET", "/auth/current"],
          ["POST", "/auth/logout"],
        ]) {
          const body = method === "POST" ? "{bad" : undefined;
          const response = await call(gw, path ?? "", { method, headers: header, body });
          expect({ header, path, status: response.status }).toEqual({ header, path, status: 401 });
          expect(response.body).toEqual({ message: "unauthorized", data: {} });
          expect(response.headers.get("www-authenticate")).toContain(reason);
        }
      }
    });

    it("answers an API token on a management route 401, without resolving it", async () => {
      // The organization service is not running either: resolving the token would be 503.
      for (const [method, path] of [
        ["GET", "/organization/list"],
        ["GET", "/api_token/list?organization_id=1"],
        ["POST", "/api_token/create?organization_id=1"],
        ["POST", "/database/create?organization_id=1"],
        ["POST", "/field/create?table_id=1"],
      ] as const) {
        const response = await call(gw, path, {
          method,
          headers: { authorization: `Bearer rb_${"A1b2".repeat(10)}` },
        });
        expect({ path, status: response.status }).toEqual({ path, status: 401 });
        expect(response.body).toEqual({ message: "unauthorized", data: {} });
        expect(response.headers.get("www-authenticate")).toBe(
          'Bearer realm="rowbase", error="invalid_token", error_description="API tokens are not accepted on this route; it takes a session token"',
        );
      }
    });

    it("answers 503 when the keys to check a well-formed token cannot be fetched", async () => {
      const header = Buffer.from(JSON.stringify({ alg: "EdDSA", kid: "k1" })).toString("base64url");
      const response = await call(gw, "/auth/current", {
        headers: { authorization: `Bearer ${header}.e30.c2ln` },
      });
      expect(response.status).toBe(503);
      expect(response.body).toEqual({ message: "service_unavailable", data: {} });
    });
  });

  describe("health", () => {
    it("answers /health with the empty success", async () => {
      const response = await call(gw, "/health");
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ message: "success", data: {} });
      expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
    });

    it("ignores query parameters, such as a monitor's cache-buster, but credentials", async () => {
      const live = await call(gw, "/health?x=1&ts=1700000000");
      expect(live.status).toBe(200);
      expect(live.body).toEqual({ message: "success", data: {} });
      const ready = await call(gw, "/health/ready?ts=1700000000");
      expect(ready.status).toBe(503);
      expect((ready.body as { message: string }).message).toBe("service_unavailable");
      const credential = await call(gw, "/health?ts=1&access_token=x");
      expect(credential.status).toBe(400);
      expect(credential.body).toEqual(
        validation("GET", "/health", [
          {
            key: "access_token",
            message:
              "credentials are not accepted in the query string; use the Authorization header",
            source: "query",
            code: "invalid_value",
          },
        ]),
      );
    });

    it("answers /health/ready 503 naming the services that do not answer", async () => {
      const response = await call(gw, "/health/ready");
      expect(response.status).toBe(503);
      expect(response.body).toEqual({
        message: "service_unavailable",
        data: { failing: ["identity", "organization", "catalog", "records", "files"] },
      });
    });
  });

  describe("/openapi.json", () => {
    let document: {
      openapi: string;
      info: { version: string };
      paths: Record<string, Record<string, Record<string, unknown>>>;
      components: { schemas: Record<string, Record<string, unknown>> };
    };

    beforeAll(async () => {
      const response = await call(gw, "/openapi.json");
      expect(response.status).toBe(200);
      document = response.body as typeof document;
    });

    it("tells the two 429s apart and documents the RateLimit headers of rate-limited routes", () => {
      type Response = { description: string; headers?: Record<string, { description: string }> };
      const responses = (path: string, method: string) =>
        document.paths[path]?.[method]?.responses as Record<string, Response>;
      const list = responses("/public/v1/databases/{database_id}/tables/{table_id}/records", "get");
      const tooMany = list["429"];
      expect(tooMany?.description).toContain("`too_many_requests`: throttled by a rate limit");
      expect(tooMany?.description).toContain(
        "`api_call_limit_exceeded`: the organization used its plan's monthly API calls",
      );
      expect(tooMany?.headers?.["Retry-After"]?.description).toContain("next month");
      for (const status of ["200", "400", "401", "404", "429", "500"]) {
        expect(Object.keys(list[status]?.headers ?? {}), status).toEqual(
          expect.arrayContaining(["RateLimit-Policy", "RateLimit"]),
        );
      }
      // Throttled only: login.
      const login = responses("/auth/login", "post");
      expect(login["429"]?.description).not.toContain("api_call_limit_exceeded");
      expect(login["200"]?.headers?.RateLimit).toBeDefined();
      // No rate limit, no RateLimit headers.
      const databases = responses("/database/get", "get");
      expect(databases["200"]?.headers?.RateLimit).toBeUndefined();
      expect(databases["429"]).toBeUndefined();
    });

    it("is a valid OpenAPI 3.1 document, version 1.0.0", async () => {
      expect(document.openapi).toBe("3.1.0");
      expect(document.info.version).toBe("1.0.0");
      // Every group of routes says what it is for (Redocly's tag-description).
      for (const tag of (document as unknown as { tags: { name: string; description?: string }[] })
        .tags) {
        expect(tag.description, tag.name).toMatch(/\S/);
      }
      const result = await new Validator().validate(document);
      expect(result.errors).toBeUndefined();
      expect(result.valid).toBe(true);
    });

    it("names as its server the port the gateway listens on, PUBLIC_BASE_URL unset", async () => {
      // `gw` listens on a free port (port 0), not on PORT's default 8080.
      expect(document).toMatchObject({ servers: [{ url: `http://localhost:${gw.running.port}` }] });
      const configured = await gateway({ PUBLIC_BASE_URL: "https://api.example.com/" });
      try {
        const response = await call(configured, "/openapi.json");
        expect(response.body).toMatchObject({ servers: [{ url: "https://api.example.com" }] });
      } finally {
        await configured.running.close();
      }
    });

    it("documents every route the router serves, with its methods, and nothing else", async () => {
      const { app, close } = createGateway(await gatewayDeps(), "http://localhost");
      const router = app.middleware
        .map((middleware) => (middleware as { router?: { stack: RouterLayer[] } }).router)
        .find((found) => found !== undefined);
      expect(router).toBeDefined();
      const served = router!.stack
        .flatMap((layer) =>
          layer.methods
            // HEAD is the router's own answer to every GET route.
            .filter((method) => method !== "HEAD")
            .map((method) => `${method} ${layer.path.replace(/:(\w+)/g, "{$1}")}`),
        )
        .sort();
      const documented = Object.entries(document.paths)
        .flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`))
        .sort();
      expect(served.length).toBeGreaterThan(60);
      expect(served).toEqual(documented);
      for (const [path, item] of Object.entries(document.paths)) {
        const names = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]);
        for (const [method, operation] of Object.entries(item)) {
          const inPath = ((operation.parameters ?? []) as { name: string; in: string }[])
            .filter((parameter) => parameter.in === "path")
            .map((parameter) => parameter.name);
          expect({ method, path, inPath }).toEqual({ method, path, inPath: names });
        }
      }
      await close();
    });

    it("resolves every $ref to a component", () => {
      const refs = JSON.stringify(document).match(/"\$ref":"[^"]+"/g) ?? [];
      expect(refs.length).toBeGreaterThan(0);
      for (const ref of refs) {
        const name = ref.slice('"$ref":"#/components/schemas/'.length, -1);
        expect(document.components.schemas, ref).toHaveProperty([name]);
      }
    });

    it("lists every account route with the schema that validates its body", () => {
      const bodies: [string, string, string, string[]][] = [
        ["/auth/register", "post", "AuthRegisterSchema", ["email", "password"]],
        ["/auth/verify_email", "post", "VerifyEmailSchema", ["email", "code"]],
        ["/auth/resend_code", "post", "ResendCodeSchema", ["email"]],
        ["/auth/login", "post", "AuthLoginSchema", ["email", "password"]],
        ["/auth/refresh", "post", "AuthRefreshSchema", ["refresh_token"]],
      ];
      for (const [path, method, schemaName, required] of bodies) {
        const operation = document.paths[path]?.[method];
        expect(operation, `${method} ${path}`).toBeDefined();
        expect(operation?.requestBody).toEqual({
          required: true,
          content: {
            "application/json": { schema: { $ref: `#/components/schemas/${schemaName}` } },
          },
        });
        const schema = document.components.schemas[schemaName];
        expect(schema).toMatchObject({ type: "object", required, additionalProperties: false });
      }
      expect(document.components.schemas.AuthRegisterSchema).toMatchObject({
        properties: {
          password: { type: "string", minLength: 8, maxLength: 128 },
          name: { type: "string", minLength: 1, maxLength: 100 },
        },
      });
      expect(document.paths["/auth/current"]?.get).toMatchObject({
        security: [{ bearerAuth: [] }],
      });
      expect(document.paths["/auth/logout"]?.post).toMatchObject({
        security: [{ bearerAuth: [] }],
      });
      expect(Object.keys(document.paths)).toEqual(
        expect.arrayContaining(["/health", "/health/ready"]),
      );
    });

    it("lists every organization and API-token route with its parameters and body", () => {
      const operations: [string, string, string[], string | undefined, string | undefined][] = [
        ["post", "/organization/create", [], "OrganizationCreateSchema", "OrganizationGet"],
        [
          "get",
          "/organization/get",
          ["organization_id?", "organization_slug?"],
          undefined,
          "OrganizationGet",
        ],
        ["get", "/organization/list", [], undefined, "OrganizationList"],
        [
          "post",
          "/organization/update",
          ["organization_id"],
          "OrganizationUpdateSchema",
          "OrganizationGet",
        ],
        ["post", "/organization/delete", ["organization_id"], undefined, undefined],
        ["get", "/organization/limits", ["organization_id"], undefined, "OrgLimits"],
        [
          "get",
          "/organization/api_stats",
          ["organization_id", "from?", "to?"],
          undefined,
          "ApiStats",
        ],
        [
          "post",
          "/organization/invite/create",
          ["organization_id"],
          "InviteCreateSchema",
          "Invite",
        ],
        [
          "post",
          "/organization/invite/cancel",
          ["organization_id", "invite_id"],
          undefined,
          undefined,
        ],
        ["get", "/organization/invite/list", ["organization_id"], undefined, "PendingInviteList"],
        ["get", "/organization/my_invite/list", [], undefined, "PendingInviteList"],
        ["post", "/organization/my_invite/accept", ["invite_id"], undefined, undefined],
        ["post", "/organization/my_invite/decline", ["invite_id"], undefined, undefined],
        ["get", "/organization/member/list", ["organization_id"], undefined, "OrgMemberList"],
        [
          "post",
          "/organization/member/update",
          ["organization_id", "member_id"],
          "OrgMemberUpdateSchema",
          undefined,
        ],
        [
          "post",
          "/organization/member/remove",
          ["organization_id", "member_id"],
          undefined,
          undefined,
        ],
        [
          "post",
          "/organization/transfer/send_code",
          ["organization_id"],
          "OwnerTransferCodeRequestSchema",
          undefined,
        ],
        [
          "post",
          "/organization/transfer/confirm",
          ["organization_id"],
          "OwnerTransferConfirmSchema",
          "OwnerTransfer",
        ],
        [
          "post",
          "/api_token/create",
          ["organization_id"],
          "ApiTokenCreateSchema",
          "ApiTokenCreate",
        ],
        ["get", "/api_token/list", ["organization_id"], undefined, "ApiTokenList"],
        ["post", "/api_token/revoke", ["organization_id", "token_id"], undefined, undefined],
      ];
      for (const [method, path, parameters, body, data] of operations) {
        const operation = document.paths[path]?.[method];
        expect(operation, `${method} ${path}`).toBeDefined();
        expect(operation?.security).toEqual([{ bearerAuth: [] }]);
        const documented = ((operation?.parameters ?? []) as Record<string, unknown>[]).map(
          (parameter) => {
            expect(parameter.in).toBe("query");
            return `${parameter.name}${parameter.required ? "" : "?"}`;
          },
        );
        expect({ path, documented }).toEqual({ path, documented: parameters });
        if (body) {
          expect(operation?.requestBody).toEqual({
            required: true,
            content: { "application/json": { schema: { $ref: `#/components/schemas/${body}` } } },
          });
          expect(document.components.schemas[body]).toMatchObject({
            type: "object",
            additionalProperties: false,
          });
        } else {
          expect(operation?.requestBody, path).toBeUndefined();
        }
        const success = JSON.stringify((operation?.responses as Record<string, unknown>)?.[200]);
        expect(success).toContain(data ? `${data}Response` : "EmptyAPIResponse");
      }
      const id = (document.paths["/organization/limits"]?.get?.parameters as unknown[])?.[0];
      expect(id).toMatchObject({
        schema: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
      });
      expect(document.components.schemas.InviteCreateSchema).toMatchObject({
        properties: { role: { enum: ["admin", "editor", "viewer"] } },
      });
      expect(document.components.schemas.ApiToken).toMatchObject({
        required: expect.arrayContaining(["token_id", "token_prefix", "last_used_at"]),
      });
    });

    it("lists the audit log and the API statistics with their parameters and errors", () => {
      const audit = document.paths["/audit/list"]?.get;
      expect(audit?.security).toEqual([{ bearerAuth: [] }]);
      const parameters = (audit?.parameters ?? []) as Record<string, unknown>[];
      expect(parameters.map((p) => `${p.name}${p.required ? "" : "?"}`)).toEqual([
        "organization_id?",
        "database_id?",
        "table_id?",
        "limit?",
        "offset?",
        "since?",
        "until?",
        "action?",
      ]);
      expect(parameters.find((p) => p.name === "limit")?.schema).toMatchObject({
        type: "integer",
        minimum: 1,
        maximum: 1000,
        default: 50,
      });
      expect(parameters.find((p) => p.name === "since")?.schema).toMatchObject({
        type: "string",
        format: "date-time",
      });
      expect(parameters.find((p) => p.name === "action")?.schema).toMatchObject({
        type: "string",
        maxLength: 100,
      });
      const auditResponses = JSON.stringify(audit?.responses);
      expect(auditResponses).toContain("AuditListResponse");
      for (const code of ["organization_not_found", "database_not_found", "table_not_found"]) {
        expect(auditResponses).toContain(code);
      }
      expect(document.components.schemas.AuditEvent).toMatchObject({
        required: ["event_id", "at", "organization_id", "actor", "action", "target", "changes"],
      });
      expect(document.components.schemas.AuditChange).toMatchObject({
        required: ["key", "old", "new"],
      });
      const stats = document.paths["/organization/api_stats"]?.get;
      expect(JSON.stringify(stats?.responses)).toContain("organization_not_found");
      expect(
        ((stats?.parameters ?? []) as Record<string, unknown>[]).find((p) => p.name === "from")
          ?.schema,
      ).toMatchObject({ type: "string", format: "date" });
      expect(document.components.schemas.ApiStats).toMatchObject({
        required: ["period", "api_calls", "transfer_bytes", "daily", "by_token"],
      });
    });

    it("lists the domain errors and the rate limit of the organization routes", () => {
      const responses = (path: string, method = "post") =>
        JSON.stringify(document.paths[path]?.[method]?.responses);
      const create = responses("/organization/create");
      for (const code of [
        "organization_limit_exceeded",
        "organization_slug_taken",
        "too_many_requests",
      ]) {
        expect(create).toContain(code);
      }
      const confirm = responses("/organization/transfer/confirm");
      for (const code of [
        "invalid_verification_code",
        "transfer_verification_code_expired",
        "member_not_found",
        "organization_forbidden",
        "organization_limit_exceeded",
      ]) {
        expect(confirm).toContain(code);
      }
      expect(responses("/api_token/revoke")).toContain("api_token_not_found");
      for (const path of [
        "/organization/delete",
        "/organization/invite/create",
        "/api_token/create",
        "/organization/transfer/send_code",
        "/organization/transfer/confirm",
      ]) {
        expect(responses(path)).toContain("too_many_requests");
      }
    });

    it("lists every database, table and field route with its parameters and body", () => {
      const operations: [string, string, string[], string | undefined, string | undefined][] = [
        ["post", "/database/create", ["organization_id"], "DatabaseCreateSchema", "DatabaseGet"],
        ["get", "/database/get", ["database_id"], undefined, "DatabaseGet"],
        ["post", "/database/update", ["database_id"], "DatabaseUpdateSchema", "DatabaseGet"],
        ["post", "/database/delete", ["database_id"], undefined, "Delete"],
        ["get", "/database/list", ["organization_id"], undefined, "DatabaseList"],
        ["post", "/table/create", ["database_id"], "TableCreateSchema", "TableGet"],
        ["get", "/table/get", ["table_id"], undefined, "TableGet"],
        ["post", "/table/update", ["table_id"], "TableUpdateSchema", "TableUpdate"],
        ["post", "/table/delete", ["table_id"], undefined, "Delete"],
        ["get", "/table/list", ["database_id"], undefined, "TableList"],
        ["post", "/field/create", ["table_id"], "FieldCreateSchema", "FieldGet"],
        ["get", "/field/list", ["table_id"], undefined, "FieldList"],
        ["post", "/field/update", ["field_id"], "FieldUpdateSchema", "FieldGet"],
        ["post", "/field/delete", ["field_id"], undefined, undefined],
      ];
      for (const [method, path, parameters, body, data] of operations) {
        const operation = document.paths[path]?.[method];
        expect(operation, `${method} ${path}`).toBeDefined();
        // The schema reads take an API token too.
        expect(operation?.security).toEqual(
          method === "get" ? [{ bearerAuth: [] }, { apiToken: [] }] : [{ bearerAuth: [] }],
        );
        const documented = ((operation?.parameters ?? []) as Record<string, unknown>[]).map(
          (parameter) => {
            expect(parameter).toMatchObject({
              in: "query",
              schema: { type: "integer", minimum: 1 },
            });
            return `${parameter.name}${parameter.required ? "" : "?"}`;
          },
        );
        expect({ path, documented }).toEqual({ path, documented: parameters });
        if (body) {
          expect(operation?.requestBody).toEqual({
            required: true,
            content: { "application/json": { schema: { $ref: `#/components/schemas/${body}` } } },
          });
          expect(document.components.schemas[body]).toMatchObject({
            type: "object",
            additionalProperties: false,
          });
        } else {
          expect(operation?.requestBody, path).toBeUndefined();
        }
        const success = JSON.stringify((operation?.responses as Record<string, unknown>)?.[200]);
        expect(success).toContain(data ? `${data}Response` : "EmptyAPIResponse");
      }
      const schemas = document.components.schemas;
      const fieldTypes = [
        "text",
        "long_text",
        "number",
        "boolean",
        "date",
        "datetime",
        "single_select",
        "multi_select",
        "email",
        "url",
        "phone",
        "json",
        "file",
        "autonumber",
        "created_at",
        "updated_at",
        "link",
        "lookup",
        "rollup",
      ];
      expect(schemas.FieldCreateSchema).toMatchObject({
        required: ["name", "type"],
        properties: {
          type: { enum: fieldTypes },
          options: { type: "object" },
          required: { type: "boolean" },
          description: { type: "string", maxLength: 1000 },
        },
      });
      expect(schemas.FieldUpdateSchema).toMatchObject({
        properties: { position: { type: "integer", minimum: 0 }, type: { enum: fieldTypes } },
      });
      expect(schemas.FieldUpdateSchema?.required).toBeUndefined();
      expect(schemas.TableCreateSchema).toMatchObject({
        required: ["name"],
        properties: {
          fields: {
            type: "array",
            maxItems: 500,
            items: { $ref: "#/components/schemas/FieldCreateSchema" },
          },
        },
      });
      expect(schemas.Field).toMatchObject({
        required: [
          "field_id",
          "table_id",
          "name",
          "type",
          "options",
          "required",
          "description",
          "position",
          "created_at",
          "updated_at",
        ],
        properties: { type: { enum: fieldTypes }, options: { type: "object" } },
      });
      expect(schemas.Database).toMatchObject({
        required: [
          "database_id",
          "organization_id",
          "name",
          "description",
          "created_at",
          "updated_at",
        ],
      });
      expect(schemas.Table).toMatchObject({
        required: ["table_id", "database_id", "name", "description", "created_at", "updated_at"],
      });
      expect(schemas.TableGet).toMatchObject({ required: ["table", "fields"] });
      expect(schemas.Delete).toMatchObject({ required: ["deleted_id"] });
    });

    it("lists the domain errors and the rate limits of the catalog routes", () => {
      const responses = (path: string, method = "post") =>
        JSON.stringify(document.paths[path]?.[method]?.responses);
      const expected: [string, string, string[]][] = [
        ["post", "/database/create", ["organization_not_found", "organization_forbidden"]],
        ["get", "/database/get", ["database_not_found"]],
        ["post", "/database/update", ["database_not_found", "organization_forbidden"]],
        ["post", "/database/delete", ["database_not_found", "organization_forbidden"]],
        ["get", "/database/list", ["organization_not_found"]],
        [
          "post",
          "/table/create",
          ["database_not_found", "table_name_taken", "field_name_taken", "invalid_field_options"],
        ],
        ["get", "/table/get", ["table_not_found"]],
        ["post", "/table/update", ["table_not_found", "table_name_taken"]],
        ["post", "/table/delete", ["table_not_found", "organization_forbidden"]],
        ["get", "/table/list", ["database_not_found"]],
        ["post", "/field/create", ["table_not_found", "field_name_taken", "invalid_field_options"]],
        ["get", "/field/list", ["table_not_found"]],
        [
          "post",
          "/field/update",
          [
            "field_not_found",
            "field_name_taken",
            "invalid_field_options",
            "field_type_change_invalid",
            "organization_forbidden",
          ],
        ],
        ["post", "/field/delete", ["field_not_found", "organization_forbidden"]],
      ];
      for (const [method, path, codes] of expected) {
        const documented = responses(path, method);
        for (const code of codes)
          expect({ path, code, documented }).toMatchObject({
            documented: expect.stringContaining(code),
          });
        const limited = path === "/database/create" || path === "/database/delete";
        expect({ path, limited: documented.includes("too_many_requests") }).toEqual({
          path,
          limited,
        });
      }
      const fieldUpdate = document.paths["/field/update"]?.post?.responses as Record<
        string,
        unknown
      >;
      expect(JSON.stringify(fieldUpdate[400])).toContain("ValidationError");
      expect(JSON.stringify(fieldUpdate[404])).toContain("field_not_found");
      expect(JSON.stringify(fieldUpdate[403])).toContain("organization_forbidden");
    });

    it("lists every record route of both families with its parameters, body and errors", () => {
      const v1 = "/public/v1/databases/{database_id}/tables/{table_id}";
      const listParameters = [
        "limit?",
        "offset?",
        "count?",
        "response_format?",
        "rich_text?",
        "where?",
        "fields?",
        "sort?",
      ];
      const readParameters = ["response_format?", "rich_text?", "fields?"];
      const operations: [string, string, string[], string | undefined, string][] = [
        [
          "get",
          `${v1}/records`,
          [...listParameters, "database_id", "table_id"],
          undefined,
          "PublicList",
        ],
        [
          "get",
          `${v1}/records/{row_id}`,
          [...readParameters, "database_id", "table_id", "row_id"],
          undefined,
          "PublicGet",
        ],
        ["post", `${v1}/records`, ["database_id", "table_id"], "PublicCreateBody", "PublicRecord"],
        [
          "patch",
          `${v1}/records/{row_id}`,
          ["database_id", "table_id", "row_id"],
          "PublicUpdateBody",
          "PublicRecord",
        ],
        [
          "delete",
          `${v1}/records/{row_id}`,
          ["database_id", "table_id", "row_id"],
          undefined,
          "PublicDelete",
        ],
        [
          "post",
          `${v1}/records/batch`,
          ["database_id", "table_id"],
          "PublicBatchCreateBody",
          "PublicBatchRecords",
        ],
        [
          "patch",
          `${v1}/records/batch`,
          ["database_id", "table_id"],
          "PublicBatchUpdateBody",
          "PublicBatchRecords",
        ],
        [
          "post",
          `${v1}/records/batch_delete`,
          ["database_id", "table_id"],
          "PublicBatchDeleteBody",
          "PublicBatchDelete",
        ],
        ["post", "/public/record/create", ["table_id"], "PublicCreateBody", "PublicRecord"],
        [
          "get",
          "/public/record/get",
          ["table_id", "row_id", "database_id?", ...readParameters],
          undefined,
          "PublicGet",
        ],
        [
          "get",
          "/public/record/list",
          ["database_id", "table_id", ...listParameters],
          undefined,
          "PublicList",
        ],
        [
          "put",
          "/public/record/update",
          ["table_id", "row_id"],
          "PublicUpdateBody",
          "PublicRecord",
        ],
        ["post", "/public/record/delete", ["table_id", "row_id"], undefined, "PublicDelete"],
        ["delete", "/public/record/delete", ["table_id", "row_id"], undefined, "PublicDelete"],
      ];
      for (const [method, path, parameters, body, data] of operations) {
        const operation = document.paths[path]?.[method];
        expect(operation, `${method} ${path}`).toBeDefined();
        expect(operation?.security).toEqual([{ bearerAuth: [] }, { apiToken: [] }]);
        const documented = ((operation?.parameters ?? []) as Record<string, unknown>[]).map(
          (parameter) => `${parameter.name}${parameter.required ? "" : "?"}`,
        );
        expect({ method, path, documented }).toEqual({ method, path, documented: parameters });
        if (body) {
          expect(operation?.requestBody).toEqual({
            required: true,
            content: { "application/json": { schema: { $ref: `#/components/schemas/${body}` } } },
          });
        } else {
          expect(operation?.requestBody, path).toBeUndefined();
        }
        const responses = operation?.responses as Record<string, unknown>;
        expect(JSON.stringify(responses[200])).toContain(`${data}Response`);
        const errors = JSON.stringify(responses);
        for (const code of [
          "table_not_found",
          "api_call_limit_exceeded",
          "too_many_requests",
          "unauthorized",
          "ValidationError",
        ]) {
          expect({ path, method, code, has: errors.includes(code) }).toMatchObject({ has: true });
        }
        const writes = method !== "get";
        expect({ path, method, readOnly: errors.includes("token_read_only") }).toEqual({
          path,
          method,
          readOnly: writes,
        });
      }
      expect(Object.keys(document.paths[`${v1}/records/{row_id}`] ?? {}).sort()).toEqual([
        "delete",
        "get",
        "patch",
      ]);
      const create = JSON.stringify(document.paths["/public/record/create"]?.post?.responses);
      expect(create).toContain("record_limit_exceeded");
      const list = document.paths["/public/record/list"]?.get?.parameters as Record<
        string,
        unknown
      >[];
      expect(list.find((parameter) => parameter.name === "limit")).toMatchObject({
        schema: { type: "integer", minimum: 1, maximum: 1000, default: 50 },
      });
      expect(list.find((parameter) => parameter.name === "response_format")).toMatchObject({
        schema: { enum: ["ids", "names"], default: "ids" },
      });
      expect(list.find((parameter) => parameter.name === "where")).toMatchObject({
        schema: { type: "string", maxLength: 4096 },
      });
      const openApi = document.paths[`${v1}/openapi.json`]?.get?.responses as Record<
        string,
        unknown
      >;
      expect(openApi[200]).toMatchObject({
        content: {
          "application/json": { schema: { $ref: "#/components/schemas/TableOpenApiDocument" } },
        },
      });
      expect(document.components.schemas.TableOpenApiDocumentResponse).toBeUndefined();
      expect(document.components.schemas.Record).toMatchObject({
        required: ["row_id", "table_id", "created_at", "updated_at", "data"],
      });
      expect(document.components.schemas.PublicList).toMatchObject({
        required: ["records", "total", "has_more", "limit", "offset"],
      });
    });

    it("documents the success and error envelopes of each route", () => {
      const login = document.paths["/auth/login"]?.post?.responses as Record<string, unknown>;
      expect(login[200]).toMatchObject({
        content: {
          "application/json": { schema: { $ref: "#/components/schemas/AuthTokenResponse" } },
        },
      });
      expect(Object.keys(login).sort()).toEqual([
        "200",
        "400",
        "401",
        "408",
        "413",
        "429",
        "500",
        "503",
      ]);
      expect(JSON.stringify(login[408])).toContain("request_timeout");
      expect(JSON.stringify(login[400])).toContain("email_not_verified");
      expect(JSON.stringify(login[400])).toContain("ValidationError");
      expect(JSON.stringify(login[401])).toContain("invalid_credentials");
      expect(document.components.schemas.AuthToken).toMatchObject({
        required: expect.arrayContaining([
          "access_token",
          "refresh_token",
          "token_type",
          "expires_in",
          "user",
        ]),
      });
    });
  });

  describe("/docs", () => {
    it("serves Swagger UI from the package, pointed at /openapi.json", async () => {
      const page = await call(gw, "/docs");
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/^text\/html/);
      expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
      const scripts = [...page.text.matchAll(/(?:src|href)="(\/docs\/[^"]+)"/g)].map((m) => m[1]);
      expect(scripts).toContain("/docs/swagger-ui-bundle.js");
      for (const asset of scripts) {
        const response = await fetch(gw.url + asset);
        expect({ asset, status: response.status }).toEqual({ asset, status: 200 });
        await response.arrayBuffer();
      }
      const initializer = await call(gw, "/docs/initializer.js");
      expect(initializer.text).toContain('url: "/openapi.json"');
    });

    it("serves no other file, not even one named like an object's own property", async () => {
      for (const name of ["package.json", "..%2Fpackage.json", "constructor", "__proto__"]) {
        const response = await call(gw, `/docs/${name}`);
        expect({ name, status: response.status, body: response.body }).toEqual({
          name,
          status: 404,
          body: { message: "not_found", data: {} },
        });
      }
    });
  });
});

describe("rate limits over HTTP", () => {
  it("answers 429 too_many_requests with Retry-After past the limit", async () => {
    const gw = await gateway({ RATE_LIMITS: "auth_register_ip=2/60" });
    try {
      const statuses: number[] = [];
      let last: Awaited<ReturnType<typeof call>> | undefined;
      for (let i = 0; i < 3; i++) {
        last = await call(gw, "/auth/register", { method: "POST", json: {} });
        statuses.push(last.status);
      }
      // Counted before validation: refused bodies use up the allowance too.
      expect(statuses).toEqual([400, 400, 429]);
      expect(last?.body).toEqual({ message: "too_many_requests", data: {} });
      expect(Number(last?.headers.get("retry-after"))).toBeGreaterThan(0);
      // The IETF RateLimit fields: the policy, and nothing left until the window ends.
      expect(last?.headers.get("ratelimit-policy")).toBe('"auth_register_ip";q=2;w=60');
      expect(last?.headers.get("ratelimit")).toBe(
        `"auth_register_ip";r=0;t=${last?.headers.get("retry-after")}`,
      );
      // Other limits keep their own count.
      expect((await call(gw, "/auth/resend_code", { method: "POST", json: {} })).status).toBe(400);
    } finally {
      await gw.running.close();
    }
  });

  it("limits login per e-mail across client IPs", async () => {
    const gw = await gateway({
      RATE_LIMITS: "auth_login_ip=off,auth_login_email=1/60",
      TRUSTED_PROXIES: "127.0.0.1",
    });
    try {
      const login = (ip: string, email: string) =>
        call(gw, "/auth/login", {
          method: "POST",
          headers: { "x-forwarded-for": ip },
          json: { email, password: "12345678" },
        });
      const first = await login("198.51.100.1", "ann@example.com");
      expect(first.status).toBe(503);
      // Every limit the request was counted under, each one a member of the lists.
      expect(first.headers.get("ratelimit-policy")).toBe('"auth_login_email";q=1;w=60');
      expect(first.headers.get("ratelimit")).toMatch(/^"auth_login_email";r=0;t=(60|59)$/);
      const second = await login("198.51.100.2", " ANN@example.com");
      expect(second.status).toBe(429);
      expect((await login("198.51.100.2", "bob@example.com")).status).toBe(503);
    } finally {
      await gw.running.close();
    }
  });

  it("limits e-mail code tries per address across client IPs", async () => {
    const gw = await gateway({
      RATE_LIMITS: "auth_verify_ip=off,auth_verify_email=2/3600",
      TRUSTED_PROXIES: "127.0.0.1",
    });
    try {
      const verify = (ip: string, email: string) =>
        call(gw, "/auth/verify_email", {
          method: "POST",
          headers: { "x-forwarded-for": ip },
          json: { email, code: "123456" },
        });
      expect((await verify("198.51.100.1", "ann@example.com")).status).toBe(503);
      expect((await verify("198.51.100.2", "Ann@Example.com")).status).toBe(503);
      const third = await verify("198.51.100.3", "ann@example.com");
      expect(third.status).toBe(429);
      expect(third.headers.get("ratelimit-policy")).toBe('"auth_verify_email";q=2;w=3600');
      expect(third.body).toEqual({ message: "too_many_requests", data: {} });
      expect((await verify("198.51.100.3", "bob@example.com")).status).toBe(503);
    } finally {
      await gw.running.close();
    }
  });

  it("keys on X-Forwarded-For only behind a trusted proxy", async () => {
    const register = (gw: TestGateway, ip: string) =>
      call(gw, "/auth/register", {
        method: "POST",
        headers: { "x-forwarded-for": ip },
        json: {},
      });
    const trusting = await gateway({
      RATE_LIMITS: "auth_register_ip=1/60",
      TRUSTED_PROXIES: "127.0.0.1",
    });
    const untrusting = await gateway({ RATE_LIMITS: "auth_register_ip=1/60" });
    try {
      expect((await register(trusting, "198.51.100.1")).status).toBe(400);
      expect((await register(trusting, "198.51.100.2")).status).toBe(400);
      expect((await register(trusting, "198.51.100.1")).status).toBe(429);

      expect((await register(untrusting, "198.51.100.1")).status).toBe(400);
      expect((await register(untrusting, "198.51.100.2")).status).toBe(429);
    } finally {
      await trusting.running.close();
      await untrusting.running.close();
    }
  });
});
