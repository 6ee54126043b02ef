import { createHash } from "node:crypto";
import { readdir } from "node:fs/promises";
import path from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { type BusMessage, callAs, createServiceClient, SUBJECTS } from "@rowbase/kit";
import {
  type ApiCallsCounted,
  ApiCallsCountedSchema,
  type TransferCounted,
  TransferCountedSchema,
} from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import type { TestSystem } from "@rowbase/standalone/testing";
import { expect } from "vitest";
import type { client } from "./http.js";
import { q } from "./organizations.js";
import { createTable, setPlan, type Tenant, v1 } from "./records.js";

/** What the file tests share: requests with raw bodies, tables with a file field, counters. */

type Api = ReturnType<typeof client>;

/** A 1x1 PNG, recognised by its bytes. */
export const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);

export const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

export interface Raw {
  status: number;
  headers: Headers;
  bytes: Buffer;
  // biome-ignore lint/suspicious/noExplicitAny: tests inspect response bodies freely
  json: any;
}

/** A request whose body and answer stay bytes (multipart uploads, served files). */
export async function raw(
  baseUrl: string,
  method: string,
  pathAndQuery: string,
  init: {
    token?: string;
    headers?: Record<string, string>;
    body?: FormData | string;
  } = {},
): Promise<Raw> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  const response = await fetch(new URL(pathAndQuery, baseUrl), {
    method,
    headers,
    body: init.body,
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString("utf8"));
  } catch {}
  return { status: response.status, headers: response.headers, bytes, json };
}

/** A multipart body with one part named `file`. */
export function filePart(content: Buffer, fileName: string, type = "application/octet-stream") {
  const form = new FormData();
  form.append("file", new Blob([content], { type }), fileName);
  return form;
}

export const pair = (rowId: number, fieldId: number) => `row_id=${rowId}&field_id=${fieldId}`;

/** A table with a file field and a text field, and `rows` records in it. */
export async function fileTable(api: Api, tenant: Tenant, rows = 1) {
  const table = await createTable(api, tenant, [
    { name: "Doc", type: "file" },
    { name: "Title", type: "text" },
  ]);
  const created = await api("POST", v1(table.databaseId, table.tableId).batch, {
    token: tenant.writeToken,
    body: { records: Array.from({ length: rows }, (_, i) => ({ data: { Title: `r${i}` } })) },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const rowIds = (created.body.data.records as { row_id: number }[]).map((r) => r.row_id);
  return { table, fieldId: table.f.Doc!.field_id, textFieldId: table.f.Title!.field_id, rowIds };
}

/** Every regular file under a directory (the directory backend's bytes, partial ones too). */
export async function storedFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => entry.name);
}

/** The files of uploads the directory backend is still receiving. */
export async function partialFiles(dir: string): Promise<number> {
  const entries = await readdir(path.join(dir, ".partial")).catch(() => []);
  return entries.length;
}

/** What the files service counts as the organization's stored bytes (GetStorageUsage). */
export async function storageUsage(sys: TestSystem, tenant: Tenant): Promise<number> {
  const files = createServiceClient(FilesService, sys.system.grpcUrls.files);
  const options = await callAs(sys.internalJwtSecret, { kind: "service", service: "e2e" }, "e2e");
  const usage = await files.getStorageUsage({ organizationId: BigInt(tenant.orgId) }, options);
  return Number(usage.fileStorageBytes);
}

/** An enterprise plan with generous limits but these. */
export async function enterprise(sys: TestSystem, tenant: Tenant, limits: Record<string, number>) {
  const all = {
    records: 10_000,
    "api-calls-per-month": 1_000_000,
    "file-storage-bytes": 1_000_000_000,
    "transfer-bytes-per-month": 1_000_000_000,
    members: 10,
    "max-file-bytes": 100_000_000,
    ...limits,
  };
  await setPlan(
    sys,
    tenant.orgId,
    "enterprise",
    ...Object.entries(all).flatMap(([flag, value]) => [`--${flag}`, String(value)]),
  );
}

/**
 * What the gateway counted for an organization this UTC month in the shared cache: its API
 * calls (`api-calls`) or the bytes of its files that moved (`transfer`).
 */
export async function counted(
  sys: TestSystem,
  counter: "api-calls" | "transfer",
  orgId: number,
): Promise<number> {
  const month = new Date().toISOString().slice(0, 7);
  return Number((await sys.system.cache.get(`${counter}:${orgId}:${month}`)) ?? 0);
}

/** The id of one of the tenant's API tokens. */
export async function tokenIdOf(api: Api, tenant: Tenant, token: string): Promise<bigint> {
  const listed = await api("GET", "/api_token/list", {
    token: tenant.owner.token,
    query: q({ organization_id: tenant.orgId }),
  });
  expect(listed.status, JSON.stringify(listed.body)).toBe(200);
  const found = (listed.body.data.api_tokens as { token_id: number; token_prefix: string }[]).find(
    (t) => token.startsWith(t.token_prefix),
  );
  if (!found) throw new Error("no such token");
  return BigInt(found.token_id);
}

export interface UsageEvents {
  /** The ApiCallsCounted events of an organization, as published. */
  apiCalls(orgId: number): ApiCallsCounted[];
  /** The TransferCounted events of an organization, as published. */
  transfers(orgId: number): TransferCounted[];
  stop(): Promise<void>;
}

/** Reads the usage events the gateway publishes on the system's bus, from the start. */
export async function usageEvents(sys: TestSystem, durable: string): Promise<UsageEvents> {
  const messages: BusMessage[] = [];
  const consumer = await sys.system.bus.consume(
    { stream: "USAGE", durable, subject: SUBJECTS.usageAny },
    async (message) => {
      messages.push(message);
    },
  );
  const of = (subject: string) => messages.filter((m) => m.subject === subject);
  return {
    apiCalls: (orgId) =>
      of(SUBJECTS.apiCallsCounted)
        .map((m) => fromBinary(ApiCallsCountedSchema, m.data))
        .filter((event) => event.organizationId === BigInt(orgId)),
    transfers: (orgId) =>
      of(SUBJECTS.transferCounted)
        .map((m) => fromBinary(TransferCountedSchema, m.data))
        .filter((event) => event.organizationId === BigInt(orgId)),
    stop: () => consumer.stop(),
  };
}
