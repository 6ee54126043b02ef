import { createHash } from "node:crypto";
import { create, fromBinary, type JsonObject, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { auditChangesOf, cachePlan, planCacheKey, SUBJECTS } from "@rowbase/kit";
import { holdAnswers } from "@rowbase/kit/testing";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import { FieldDeletedSchema } from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { EventMetaSchema } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { PlanChangedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { ContentDisposition } from "@rowbase/proto/rowbase/files/v1/files_pb";
import { PlanLimitsSchema, PlanName } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DURABLES } from "../src/listeners.js";
import { Upstream } from "../src/upstream.js";
import {
  as,
  type Backend,
  collect,
  eventsOf,
  failureOf,
  type Harness,
  OPERATOR,
  range,
  reasonOf,
  record,
  SECRET,
  SERVICE,
  SMALL_LIMITS,
  startHarness,
  type Team,
  type TestUser,
  team,
  token,
  uploadMessages,
  validationOf,
  type Workspace,
  workspace,
} from "./harness.js";

/** A 1x1 PNG. */
export const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);

const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");

/** Deterministic bytes that no sniffer takes for anything but octet-stream. */
function binary(size: number, seed = 1): Buffer {
  const buffer = Buffer.alloc(size);
  for (let i = 0; i < size; i++) buffer[i] = ((i * 31 + seed) % 256) | 0x80;
  buffer[0] = 0;
  return buffer;
}

/**
 * Every files RPC against the real sibling services, with the bytes in the given backend:
 * uploads and serving, ranges, sniffing, signed URLs, rename, delete and restore, the plan's and
 * the field's limits (racing uploads included), access rules, and the deletion sagas and purge.
 */
export function filesSuite(backend: Backend) {
  let h: Harness;
  let t: Team;
  let ws: Workspace;

  beforeAll(async () => {
    h = await startHarness(backend);
    t = await team(h);
    ws = await workspace(h, t.owner, t.organizationId);
  });

  afterAll(async () => {
    await h?.stop();
  });

  async function upload(
    who: TestUser | ReturnType<typeof token>,
    rowId: bigint,
    fieldId: bigint,
    content: Uint8Array | string,
    options: { fileName?: string; declaredSize?: bigint; chunkSize?: number } = {},
  ) {
    const { file } = await h.files.uploadFile(
      uploadMessages(
        {
          rowId,
          fieldId,
          ...(options.fileName ? { fileName: options.fileName } : {}),
          ...(options.declaredSize !== undefined ? { declaredSize: options.declaredSize } : {}),
        },
        content,
        options.chunkSize,
      ),
      await as(who),
    );
    return file!;
  }

  async function serve(
    who: TestUser,
    rowId: bigint,
    fieldId: bigint,
    r?: ReturnType<typeof range>,
  ) {
    return collect(
      h.files.serveFile({ rowId, fieldId, ...(r ? { range: r } : {}) }, await as(who)),
    );
  }

  async function fileRows(rowId: bigint) {
    const { rows } = await h.db.query("select * from files.file where row_id = $1 order by id", [
      rowId.toString(),
    ]);
    return rows;
  }

  async function usage(organizationId: bigint): Promise<number> {
    const { fileStorageBytes } = await h.files.getStorageUsage(
      { organizationId },
      await as(SERVICE),
    );
    return Number(fileStorageBytes);
  }

  async function liveFiles(column: "row_id" | "table_id" | "organization_id", id: bigint) {
    const { rows } = await h.db.query(
      `select count(*)::int as n from files.file where ${column} = $1 and deleted_at is null`,
      [id.toString()],
    );
    return rows[0].n as number;
  }

  /**
   * Runs `body` while the files service cannot apply the deletion of these scopes: the consumer
   * that would takes them exclusively (db/scopes.ts) and waits for this shared hold, as it
   * would wait for a stopped consumer or bus.
   */
  async function holdingDeletions(
    scopes: { kind: "organization" | "table" | "row"; id: bigint }[],
    body: () => Promise<void>,
  ) {
    const client = await h.db.connect();
    try {
      await client.query("begin");
      for (const { kind, id } of scopes) {
        await client.query("select pg_advisory_xact_lock_shared(hashtextextended($1, 0))", [
          `files.${kind}:${id}`,
        ]);
      }
      await body();
    } finally {
      await client.query("rollback");
      client.release();
    }
  }

  /**
   * Runs `body` while the files service cannot apply any event: its consumers record each one in
   * `processed_event` in the transaction that applies it, and wait for this hold on the table,
   * as they would wait for a stopped consumer or a lagging bus.
   */
  async function holdingEvents(body: () => Promise<void>) {
    const client = await h.db.connect();
    try {
      await client.query("begin");
      await client.query("lock table files.processed_event in share mode");
      await body();
    } finally {
      await client.query("rollback");
      client.release();
    }
  }

  /** Whether the files consumer `durable` has applied the event `id`. */
  async function applied(durable: string, id: string): Promise<boolean> {
    const { rows } = await h.db.query(
      "select 1 from files.processed_event where consumer = $1 and event_id = $2",
      [durable, id],
    );
    return rows.length > 0;
  }

  /** Nothing of a refused upload is left: no row, no queued key, no bytes. */
  async function expectNothingLeft(rowId: bigint, before: Set<string>) {
    expect(await fileRows(rowId)).toEqual([]);
    const { rows } = await h.db.query("select count(*)::int as n from files.blob_gc");
    expect(rows[0].n).toBe(0);
    expect(await h.storedKeys()).toEqual(before);
  }

  describe("UploadFile and ServeFile", () => {
    it("stores a streamed upload, sniffs it, hashes it, audits it and serves it back", async () => {
      const rowId = await record(h, t.editor, ws);
      const before = await usage(t.organizationId);
      const file = await upload(t.editor, rowId, ws.doc, PNG, {
        fileName: "pixel.png",
        chunkSize: 7,
      });
      expect(file).toMatchObject({
        rowId,
        fieldId: ws.doc,
        fileName: "pixel.png",
        contentType: "image/png",
        size: BigInt(PNG.length),
        sha256: sha256(PNG),
      });
      expect(file.createdAt).toBeDefined();
      expect(file.deletedAt).toBeUndefined();
      expect(await usage(t.organizationId)).toBe(before + PNG.length);
      const [row] = await fileRows(rowId);
      expect(row.storage_key).toMatch(/^[0-9a-f]{32}$/);
      expect((await h.storedKeys()).has(row.storage_key)).toBe(true);

      const served = await serve(t.viewer, rowId, ws.doc);
      expect(served.bytes.equals(PNG)).toBe(true);
      expect(served.header).toMatchObject({
        organizationId: t.organizationId,
        disposition: ContentDisposition.INLINE,
        file: { fileName: "pixel.png", contentType: "image/png", sha256: sha256(PNG) },
      });
      expect(served.header.range).toBeUndefined();

      await expect
        .poll(() =>
          eventsOf(h.events, "audit.file.uploaded", AuditEventSchema).some(
            (e) => e.target?.id === rowId,
          ),
        )
        .toBe(true);
      const audit = eventsOf(h.events, "audit.file.uploaded", AuditEventSchema).find(
        (e) => e.target?.id === rowId,
      )!;
      expect(audit).toMatchObject({
        organizationId: t.organizationId,
        databaseId: ws.databaseId,
        tableId: ws.tableId,
        action: "file.uploaded",
        target: { type: "file", id: rowId, fieldId: ws.doc },
      });
      expect(audit.meta?.actor?.id).toBe(t.editor.id);
      expect(auditChangesOf(audit.changesJson).map((c) => c.key)).toEqual([
        "file_name",
        "content_type",
        "size",
        "sha256",
      ]);
    });

    it("streams large files both ways in chunks", async () => {
      const rowId = await record(h, t.editor, ws);
      const content = binary(3 * 1024 * 1024 + 17);
      const file = await upload(t.editor, rowId, ws.doc, content, { chunkSize: 100_000 });
      expect(file.size).toBe(BigInt(content.length));
      expect(file.sha256).toBe(sha256(content));
      expect(file.contentType).toBe("application/octet-stream");
      const served = await serve(t.editor, rowId, ws.doc);
      expect(served.messages).toBeGreaterThan(10);
      expect(served.bytes.equals(content)).toBe(true);
      expect(served.header.disposition).toBe(ContentDisposition.ATTACHMENT);
    });

    it("serves byte ranges like HTTP Range, and refuses unsatisfiable ones", async () => {
      const rowId = await record(h, t.editor, ws);
      const content = "0123456789abcdefghij";
      await upload(t.editor, rowId, ws.doc, content, { fileName: "digits.txt" });
      const middle = await serve(t.viewer, rowId, ws.doc, range(2n, 9n));
      expect(middle.bytes.toString()).toBe("23456789");
      expect(middle.header.range).toMatchObject({ first: 2n, last: 9n });
      expect(middle.header.file?.size).toBe(20n);
      expect((await serve(t.viewer, rowId, ws.doc, range(15n))).bytes.toString()).toBe("fghij");
      const suffix = await serve(t.viewer, rowId, ws.doc, range(0n, undefined, 3n));
      expect(suffix.bytes.toString()).toBe("hij");
      expect(suffix.header.range).toMatchObject({ first: 17n, last: 19n });
      const past = await serve(t.viewer, rowId, ws.doc, range(10n, 1000n));
      expect(past.bytes.toString()).toBe("abcdefghij");
      expect(past.header.range).toMatchObject({ first: 10n, last: 19n });
      for (const r of [range(20n), range(25n, 30n), range(5n, 4n), range(0n, undefined, 0n)]) {
        const failure = await failureOf(serve(t.viewer, rowId, ws.doc, r));
        expect(failure).toMatchObject({
          code: Code.OutOfRange,
          reason: "range_not_satisfiable",
          metadata: { size: "20" },
        });
      }
    });

    it("replaces the pair's file: the previous one is soft-deleted and still counted", async () => {
      const rowId = await record(h, t.editor, ws);
      const before = await usage(t.organizationId);
      await upload(t.editor, rowId, ws.doc, "first version", { fileName: "v1.txt" });
      const second = await upload(t.editor, rowId, ws.doc, "second!", { fileName: "v2.txt" });
      const rows = await fileRows(rowId);
      expect(rows.map((r) => [r.file_name, r.deleted_at !== null])).toEqual([
        ["v1.txt", true],
        ["v2.txt", false],
      ]);
      expect(await usage(t.organizationId)).toBe(before + 13 + 7);
      const served = await serve(t.viewer, rowId, ws.doc);
      expect(served.bytes.toString()).toBe("second!");
      expect(served.header.file?.fileName).toBe(second.fileName);
    });

    it("serialises uploads racing to one pair: one live file, the others replaced", async () => {
      const rowId = await record(h, t.editor, ws);
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          upload(t.editor, rowId, ws.doc, `version ${i}`, { fileName: `v${i}.txt` }),
        ),
      );
      expect(results).toHaveLength(6);
      const rows = await fileRows(rowId);
      expect(rows).toHaveLength(6);
      const live = rows.filter((r) => r.deleted_at === null);
      expect(live).toHaveLength(1);
      expect(live[0].id).toBe(rows.at(-1).id);
      expect((await serve(t.viewer, rowId, ws.doc)).header.file?.fileName).toBe(live[0].file_name);
    });

    it("answers file_not_found when the bytes are gone, and masks unexpected failures", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "fragile");
      const [row] = await fileRows(rowId);
      await h.running.blobs.delete(row.storage_key);
      expect(await reasonOf(serve(t.viewer, rowId, ws.doc))).toBe("file_not_found");
      await h.db.query("update files.file set storage_key = '../../etc/passwd' where id = $1", [
        row.id,
      ]);
      const failure = await failureOf(serve(t.viewer, rowId, ws.doc));
      expect(failure).toMatchObject({ code: Code.Internal, reason: undefined });
      const message = await serve(t.viewer, rowId, ws.doc).catch((e: Error) => e.message);
      expect(message).toBe("[internal] internal error");
    });

    it("takes the content type from the bytes, never from the name", async () => {
      const rowId = await record(h, t.editor, ws);
      const html =
        "<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>";
      const file = await upload(t.editor, rowId, ws.doc, html, { fileName: "cat.png" });
      expect(file.contentType).toBe("text/html");
      const served = await serve(t.viewer, rowId, ws.doc);
      expect(served.header.disposition).toBe(ContentDisposition.ATTACHMENT);
      expect(served.header.file?.contentType).toBe("text/html");

      const svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>';
      expect(
        (await upload(t.editor, rowId, ws.doc, svg, { fileName: "logo.png" })).contentType,
      ).toBe("image/svg+xml");
      expect((await serve(t.viewer, rowId, ws.doc)).header.disposition).toBe(
        ContentDisposition.ATTACHMENT,
      );
      const text = await upload(t.editor, rowId, ws.doc, "plain words ✓", { fileName: "x.exe" });
      expect(text.contentType).toBe("text/plain");
      expect((await serve(t.viewer, rowId, ws.doc)).header.disposition).toBe(
        ContentDisposition.INLINE,
      );
      const png = await upload(t.editor, rowId, ws.doc, PNG, { fileName: "page.html" });
      expect(png.contentType).toBe("image/png");
    });

    it("keeps only the last segment of an uploaded name, without control characters", async () => {
      const rowId = await record(h, t.editor, ws);
      const file = await upload(t.editor, rowId, ws.doc, "x", {
        fileName: "../../etc/pass\u0000wd",
      });
      expect(file.fileName).toBe("passwd");
      const windows = await upload(t.editor, rowId, ws.doc, "x", {
        fileName: "C:\\fakepath\\report.txt",
      });
      expect(windows.fileName).toBe("report.txt");
      const invisible = await upload(t.editor, rowId, ws.doc, "x", { fileName: "\u200b" });
      expect(invisible.fileName).toBe("file");
    });

    it("stores empty files", async () => {
      const rowId = await record(h, t.editor, ws);
      const file = await upload(t.editor, rowId, ws.doc, "", { fileName: "empty.txt" });
      expect(file.size).toBe(0n);
      expect(file.sha256).toBe(sha256(""));
      expect((await serve(t.viewer, rowId, ws.doc)).bytes.length).toBe(0);
      expect(await reasonOf(serve(t.viewer, rowId, ws.doc, range(0n)))).toBe(
        "range_not_satisfiable",
      );
    });

    it("refuses a stream that does not start with its header, or repeats it", async () => {
      const rowId = await record(h, t.editor, ws);
      async function* chunkFirst() {
        yield {
          $typeName: "rowbase.files.v1.UploadFileRequest" as const,
          payload: { case: "chunk" as const, value: Buffer.from("x") },
        };
      }
      expect(await validationOf(h.files.uploadFile(chunkFirst(), await as(t.editor)))).toEqual([
        {
          key: "file",
          message: "the first message must be the header",
          source: "body",
          code: "invalid_value",
        },
      ]);
      async function* twoHeaders() {
        const messages = uploadMessages({ rowId, fieldId: ws.doc }, "abc");
        const first = (await messages.next()).value!;
        yield first;
        yield first;
      }
      const before = await h.storedKeys();
      expect(await validationOf(h.files.uploadFile(twoHeaders(), await as(t.editor)))).toEqual([
        {
          key: "file",
          message: "only the first message may be the header",
          source: "body",
          code: "invalid_value",
        },
      ]);
      await expectNothingLeft(rowId, before);
    });

    it("stores nothing of an upload its client cancels mid-stream", async () => {
      const rowId = await record(h, t.editor, ws);
      const before = await h.storedKeys();
      const usageBefore = await usage(t.organizationId);
      // An upload's storage key is reserved in blob_gc (due in 24 hours) while its bytes stream,
      // and unreserved once it is committed or discarded.
      const reservations = async () => {
        const { rows } = await h.db.query(
          "select count(*)::int as n from files.blob_gc where due_at > now() + interval '1 hour'",
        );
        return rows[0].n as number;
      };
      const controller = new AbortController();
      const rest = Promise.withResolvers<void>();
      async function* halfSent() {
        yield* uploadMessages(
          { rowId, fieldId: ws.doc, fileName: "half.bin" },
          binary(64 * 1024),
          16 * 1024,
        );
        // The client goes away before the rest of the file.
        await rest.promise;
      }
      const call = h.files.uploadFile(halfSent(), {
        ...(await as(t.editor)),
        signal: controller.signal,
      });
      const failure = failureOf(call);
      await expect.poll(reservations).toBe(1);
      controller.abort();
      expect(await failure).toMatchObject({ code: Code.Canceled });
      rest.resolve();
      // The service is done with the call: nothing was committed, the bytes were removed.
      await expect.poll(reservations).toBe(0);
      await expectNothingLeft(rowId, before);
      expect(await usage(t.organizationId)).toBe(usageBefore);
      expect(await reasonOf(serve(t.viewer, rowId, ws.doc))).toBe("file_not_found");
    });

    it("answers file_not_found for a pair without a live file and for ids 0", async () => {
      const rowId = await record(h, t.editor, ws);
      expect(await reasonOf(serve(t.viewer, rowId, ws.doc))).toBe("file_not_found");
      expect(await reasonOf(serve(t.viewer, 0n, ws.doc))).toBe("file_not_found");
      expect(await reasonOf(serve(t.viewer, rowId, 0n))).toBe("file_not_found");
    });
  });

  describe("field checks", () => {
    it("refuses fields of the organization that are not file fields of the record's table", async () => {
      const rowId = await record(h, t.editor, ws);
      const other = await workspace(h, t.owner, t.organizationId);
      for (const fieldId of [ws.name, other.doc, other.name]) {
        const failure = await failureOf(upload(t.editor, rowId, fieldId, "x"));
        expect(failure).toMatchObject({
          code: Code.InvalidArgument,
          reason: "field_not_file_type",
        });
      }
      expect(await reasonOf(serve(t.viewer, rowId, ws.name))).toBe("field_not_file_type");
      expect(
        await reasonOf(h.files.createFileUrl({ rowId, fieldId: other.doc }, await as(t.viewer))),
      ).toBe("field_not_file_type");
    });

    it("answers field_not_found for a field that exists nowhere or in another organization only", async () => {
      const rowId = await record(h, t.editor, ws);
      const foreign = await workspace(h, t.outsider, t.outsiderOrganizationId);
      const before = await fileRows(rowId);
      for (const fieldId of [999_999_999n, foreign.doc, foreign.name, 0n]) {
        const failure = await failureOf(upload(t.editor, rowId, fieldId, "x"));
        expect({ fieldId, ...failure }).toMatchObject({
          fieldId,
          code: Code.NotFound,
          reason: "field_not_found",
        });
      }
      for (const fieldId of [999_999_999n, foreign.doc]) {
        expect(await reasonOf(serve(t.viewer, rowId, fieldId))).toBe("field_not_found");
        expect(await reasonOf(h.files.createFileUrl({ rowId, fieldId }, await as(t.viewer)))).toBe(
          "field_not_found",
        );
      }
      expect(await fileRows(rowId)).toEqual(before);
    });

    it("answers record_not_found for unknown rows", async () => {
      expect(await reasonOf(upload(t.editor, 987_654_321n, ws.doc, "x"))).toBe("record_not_found");
      expect(await reasonOf(upload(t.editor, 0n, ws.doc, "x"))).toBe("record_not_found");
      expect(await reasonOf(serve(t.viewer, 987_654_321n, ws.doc))).toBe("record_not_found");
      expect(
        await reasonOf(
          h.files.storageCheck({ rowId: 987_654_321n, fileSize: 1n }, await as(t.editor)),
        ),
      ).toBe("record_not_found");
    });

    it("applies the field's max_size and allowed_types, leaving nothing behind", async () => {
      const rowId = await record(h, t.editor, ws);
      expect((await upload(t.editor, rowId, ws.picture, PNG)).contentType).toBe("image/png");
      const before = await h.storedKeys();
      const usageBefore = await usage(t.organizationId);
      const other = await record(h, t.editor, ws);
      const tooBig = Buffer.concat([PNG, Buffer.alloc(1001 - PNG.length, 0)]);
      const failure = await failureOf(upload(t.editor, other, ws.picture, tooBig));
      expect(failure).toMatchObject({ reason: "file_too_large", metadata: { max_bytes: "1000" } });
      expect(
        await reasonOf(upload(t.editor, other, ws.picture, PNG, { declaredSize: 1001n })),
      ).toBe("file_too_large");
      expect(await validationOf(upload(t.editor, other, ws.picture, "just text"))).toEqual([
        {
          key: "file",
          message: "is text/plain, this field takes image/*",
          source: "body",
          code: "invalid_value",
        },
      ]);
      await expectNothingLeft(other, before);
      expect(await usage(t.organizationId)).toBe(usageBefore);
    });
  });

  describe("plan limits", () => {
    let small: Team;
    let smallWs: Workspace;

    beforeAll(async () => {
      small = await team(h, SMALL_LIMITS);
      smallWs = await workspace(h, small.owner, small.organizationId);
    });

    it("counts each organization's storage on its own, and keeps what a lowered plan stores", async () => {
      const teams = [await team(h, SMALL_LIMITS), await team(h, SMALL_LIMITS)];
      const spaces = await Promise.all(
        teams.map((one) => workspace(h, one.owner, one.organizationId)),
      );
      const rows = await Promise.all(
        teams.flatMap((one, i) =>
          Array.from({ length: 6 }, () => record(h, one.editor, spaces[i]!)),
        ),
      );
      const results = await Promise.allSettled(
        rows.map((rowId, i) => {
          const mine = Math.floor(i / 6);
          return upload(teams[mine]!.editor, rowId, spaces[mine]!.doc, binary(3000, i));
        }),
      );
      for (const [index, { organizationId }] of teams.entries()) {
        const mine = results.slice(index * 6, index * 6 + 6);
        expect(mine.filter((r) => r.status === "fulfilled")).toHaveLength(3);
        for (const result of mine) {
          if (result.status === "rejected") {
            expect(await reasonOf(Promise.reject(result.reason))).toBe("storage_limit_exceeded");
          }
        }
        expect(await usage(organizationId)).toBe(9000);
        expect(await liveFiles("organization_id", organizationId)).toBe(3);
      }

      // The first organization's plan shrinks below what it stores: the files stay, served as
      // before, and no upload fits until purged files have given their bytes back.
      const [lowered] = teams;
      const loweredWs = spaces[0]!;
      await h.org.setPlan(
        {
          organizationId: lowered!.organizationId,
          plan: PlanName.ENTERPRISE,
          enterpriseLimits: create(PlanLimitsSchema, { ...SMALL_LIMITS, fileStorageBytes: 5000n }),
        },
        await as(OPERATOR),
      );
      const fresh = await record(h, lowered!.editor, loweredWs);
      const check = async () =>
        reasonOf(h.files.storageCheck({ rowId: fresh, fileSize: 1n }, await as(lowered!.editor)));
      await expect.poll(check, { timeout: 10_000 }).toBe("storage_limit_exceeded");
      expect(await reasonOf(upload(lowered!.editor, fresh, loweredWs.doc, "x"))).toBe(
        "storage_limit_exceeded",
      );
      expect(await usage(lowered!.organizationId)).toBe(9000);
      expect(await liveFiles("organization_id", lowered!.organizationId)).toBe(3);
      const kept = rows.slice(0, 6).filter((_, i) => results[i]!.status === "fulfilled");
      expect((await serve(lowered!.editor, kept[0]!, loweredWs.doc)).bytes).toHaveLength(3000);
      for (const rowId of kept) {
        await h.files.deleteFile({ rowId, fieldId: loweredWs.doc }, await as(lowered!.editor));
      }
      expect(await reasonOf(upload(lowered!.editor, fresh, loweredWs.doc, "x"))).toBe(
        "storage_limit_exceeded",
      );
      await h.db.query(
        "update files.file set deleted_at = now() - interval '31 days' where organization_id = $1",
        [lowered!.organizationId.toString()],
      );
      await h.running.maintain();
      expect(await usage(lowered!.organizationId)).toBe(0);
      const again = await Promise.all(
        Array.from({ length: 4 }, () => record(h, lowered!.editor, loweredWs)),
      );
      const refilled = await Promise.allSettled(
        again.map((rowId, i) => upload(lowered!.editor, rowId, loweredWs.doc, binary(3000, i))),
      );
      expect(refilled.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      expect(await usage(lowered!.organizationId)).toBe(3000);
      // The other organization's storage did not move.
      expect(await usage(teams[1]!.organizationId)).toBe(9000);
    });

    it("never caches a plan a lookup read before a change it raced", async () => {
      const owner = await h.user("Racing plans");
      const { organization } = await h.org.createOrganization(
        { name: "Racing", organizationSlug: "" },
        await as(owner),
      );
      const organizationId = organization!.organizationId;
      const key = planCacheKey(organizationId);
      const upstreamOf = (organizations: typeof h.org) => {
        const upstream = new Upstream(
          {
            records: "http://127.0.0.1:1",
            catalog: "http://127.0.0.1:1",
            organization: "http://127.0.0.1:1",
          },
          SECRET,
          h.cache,
          h.logger,
        );
        // Its organization client replaced, to hold GetPlan's answer (the only call made here).
        Object.assign(upstream, { organizations });
        return upstream;
      };
      // Another files replica asks for the free plan, and its answer is delayed past a change.
      const slow = holdAnswers(h.org, "getPlan");
      const lookup = upstreamOf(slow.client).planLimits(organizationId, "slow");
      const { limits, planVersion } = await slow.answered;
      // Meanwhile another replica cached the old plan too; the change must replace it.
      await cachePlan(h.cache, organizationId, planVersion, limits!);
      const old = await h.cache.get(key);
      await h.org.setPlan(
        {
          organizationId,
          plan: PlanName.ENTERPRISE,
          enterpriseLimits: create(PlanLimitsSchema, SMALL_LIMITS),
        },
        await as(OPERATOR),
      );
      await expect.poll(() => h.cache.get(key), { timeout: 10_000 }).not.toBe(old);
      slow.release();
      expect((await lookup).fileStorageBytes).toBe(100_000_000n);
      // Whatever the late answer did, the next lookup gets the new limits.
      const fresh = await upstreamOf(h.org).planLimits(organizationId, "fresh");
      expect(fresh.fileStorageBytes).toBe(SMALL_LIMITS.fileStorageBytes);
    });

    it("enforces a lowered plan once its change is answered, before files applies its event", async () => {
      // On the free plan, which no change has marked yet: files reads it once and caches it.
      const owner = await h.user("Lowered at once");
      const { organization } = await h.org.createOrganization(
        { name: "Lowered", organizationSlug: "" },
        await as(owner),
      );
      const organizationId = organization!.organizationId;
      const space = await workspace(h, owner, organizationId);
      const [stored, next] = [await record(h, owner, space), await record(h, owner, space)];
      await upload(owner, stored, space.doc, binary(3000));
      expect(
        await h.files.storageCheck({ rowId: next, fileSize: 3000n }, await as(owner)),
      ).toBeDefined();
      const before = await h.storedKeys();
      const changed = () =>
        h.events.find((e) => {
          if (e.subject !== SUBJECTS.planChanged) return false;
          const event = fromBinary(PlanChangedSchema, e.data);
          return (
            event.organizationId === organizationId && event.limits?.fileStorageBytes === 5000n
          );
        });
      await holdingEvents(async () => {
        await h.org.setPlan(
          {
            organizationId: organizationId,
            plan: PlanName.ENTERPRISE,
            enterpriseLimits: create(PlanLimitsSchema, {
              ...SMALL_LIMITS,
              fileStorageBytes: 5000n,
            }),
          },
          await as(OPERATOR),
        );
        // The change's event is on the bus, and files has not applied it.
        await expect.poll(changed).toBeDefined();
        expect(await applied(DURABLES.organization, changed()!.id)).toBe(false);
        expect(
          await reasonOf(h.files.storageCheck({ rowId: next, fileSize: 3000n }, await as(owner))),
        ).toBe("storage_limit_exceeded");
        expect(await reasonOf(upload(owner, next, space.doc, binary(3000)))).toBe(
          "storage_limit_exceeded",
        );
        await expectNothingLeft(next, before);
        expect(await usage(organizationId)).toBe(3000);
        expect(await applied(DURABLES.organization, changed()!.id)).toBe(false);
      });
      await expect.poll(() => applied(DURABLES.organization, changed()!.id)).toBe(true);
      // What fits the lowered plan is still taken.
      expect((await upload(owner, next, space.doc, binary(2000))).size).toBe(2000n);
      expect(await usage(organizationId)).toBe(5000);
    });

    it("cuts an upload past max_file_bytes mid-stream and leaves nothing", async () => {
      const rowId = await record(h, small.editor, smallWs);
      const before = await h.storedKeys();
      const failure = await failureOf(
        upload(small.editor, rowId, smallWs.doc, binary(5001), { chunkSize: 1000 }),
      );
      expect(failure).toMatchObject({ reason: "file_too_large", metadata: { max_bytes: "5000" } });
      expect(
        await reasonOf(upload(small.editor, rowId, smallWs.doc, "x", { declaredSize: 5001n })),
      ).toBe("file_too_large");
      await expectNothingLeft(rowId, before);
      expect(await usage(small.organizationId)).toBe(0);
      expect((await upload(small.editor, rowId, smallWs.doc, binary(5000))).size).toBe(5000n);
      await h.files.deleteFile({ rowId, fieldId: smallWs.doc }, await as(small.editor));
    });

    it("answers StorageCheck with the error an upload would get", async () => {
      const rowId = await record(h, small.editor, smallWs);
      const check = async (fileSize: bigint) =>
        h.files.storageCheck({ rowId, fileSize }, await as(small.editor));
      const used = await usage(small.organizationId);
      expect(await check(0n)).toBeDefined();
      expect(await check(BigInt(Math.min(5000, 10_000 - used)))).toBeDefined();
      expect(await failureOf(check(5001n))).toMatchObject({
        reason: "file_too_large",
        metadata: { max_bytes: "5000" },
      });
      await upload(small.editor, rowId, smallWs.doc, binary(10_000 - used - 100));
      expect(await reasonOf(check(101n))).toBe("storage_limit_exceeded");
      expect(await check(100n)).toBeDefined();
      expect(await validationOf(check(-1n))).toEqual([
        { key: "file_size", message: "must be 0 or more", source: "query", code: "out_of_range" },
      ]);
      expect(
        await reasonOf(h.files.storageCheck({ rowId, fileSize: 1n }, await as(small.viewer))),
      ).toBe("organization_forbidden");
      // Free the space for the race below: purge what is stored.
      await h.db.query(
        "update files.file set deleted_at = now() - interval '31 days' where organization_id = $1",
        [small.organizationId.toString()],
      );
      await h.running.maintain();
      expect(await usage(small.organizationId)).toBe(0);
    });

    it("lets parallel uploads take exactly what file_storage_bytes allows", async () => {
      const before = await h.storedKeys();
      const rows = await Promise.all(
        Array.from({ length: 10 }, () => record(h, small.editor, smallWs)),
      );
      const results = await Promise.allSettled(
        rows.map((rowId, i) => upload(small.editor, rowId, smallWs.doc, binary(3000, i))),
      );
      const stored = results.filter((r) => r.status === "fulfilled");
      expect(stored).toHaveLength(3);
      for (const result of results) {
        if (result.status === "rejected") {
          expect(await reasonOf(Promise.reject(result.reason))).toBe("storage_limit_exceeded");
        }
      }
      expect(await usage(small.organizationId)).toBe(9000);
      const { rows: live } = await h.db.query(
        "select storage_key from files.file where organization_id = $1",
        [small.organizationId.toString()],
      );
      expect(live).toHaveLength(3);
      const { rows: queued } = await h.db.query("select count(*)::int as n from files.blob_gc");
      expect(queued[0].n).toBe(0);
      // Exactly the three stored files added bytes (the purge job may remove older ones meanwhile).
      const now = await h.storedKeys();
      const added = [...now].filter((key) => !before.has(key)).sort();
      expect(added).toEqual(live.map((row: { storage_key: string }) => row.storage_key).sort());
      expect(await reasonOf(upload(small.editor, rows[0]!, smallWs.doc, binary(1001)))).toBe(
        "storage_limit_exceeded",
      );
    });
  });

  describe("CreateFileUrl and ServeSignedFile", () => {
    it("signs a URL any reader may ask for, served without a principal", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, PNG, { fileName: "p.png" });
      const started = Date.now();
      const { token: signed, expiresAt } = await h.files.createFileUrl(
        { rowId, fieldId: ws.doc },
        await as(token(t.organizationId, "read")),
      );
      expect(signed).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
      const expiry = Number(expiresAt!.seconds) * 1000;
      expect(expiry).toBeGreaterThan(started + 3598_000);
      expect(expiry).toBeLessThan(started + 3602_000);
      const served = await collect(h.files.serveSignedFile({ token: signed }));
      expect(served.bytes.equals(PNG)).toBe(true);
      expect(served.header).toMatchObject({
        organizationId: t.organizationId,
        disposition: ContentDisposition.INLINE,
        file: { rowId, fieldId: ws.doc, fileName: "p.png" },
      });
      const ranged = await collect(
        h.files.serveSignedFile({ token: signed, range: range(0n, 7n) }),
      );
      expect(ranged.bytes.equals(PNG.subarray(0, 8))).toBe(true);
      expect(ranged.header.range).toMatchObject({ first: 0n, last: 7n });

      const download = await h.files.createFileUrl(
        { rowId, fieldId: ws.doc, download: true },
        await as(t.viewer),
      );
      expect(
        (await collect(h.files.serveSignedFile({ token: download.token }))).header.disposition,
      ).toBe(ContentDisposition.ATTACHMENT);
    });

    it("refuses tampered and foreign tokens with file_not_found", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "secret");
      const { token: signed } = await h.files.createFileUrl(
        { rowId, fieldId: ws.doc },
        await as(t.viewer),
      );
      const [payload, signature] = signed.split(".") as [string, string];
      const decoded = Buffer.from(payload, "base64url").toString();
      const other = Buffer.from(
        decoded.replace(/:[01]$/, (d) => (d === ":1" ? ":0" : ":1")),
      ).toString("base64url");
      const later = Buffer.from(
        decoded.replace(/:(\d+):([01])$/, (_, exp, d) => `:${Number(exp) + 86_400}:${d}`),
      ).toString("base64url");
      const flipped = `${signature.slice(0, -1)}${signature.endsWith("A") ? "B" : "A"}`;
      for (const bad of [
        `${other}.${signature}`,
        `${later}.${signature}`,
        `${payload}.${flipped}`,
        `${payload}.`,
        "",
        "not-a-token",
        `${signed}x`,
      ]) {
        const failure = await failureOf(collect(h.files.serveSignedFile({ token: bad })));
        expect(failure).toMatchObject({ code: Code.NotFound, reason: "file_not_found" });
      }
    });

    it("dies with the file: replaced, deleted (even once restored), and at expiry", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "one");
      const url = async () =>
        (await h.files.createFileUrl({ rowId, fieldId: ws.doc }, await as(t.viewer))).token;
      const serveSigned = (signed: string) => collect(h.files.serveSignedFile({ token: signed }));
      const first = await url();
      await upload(t.editor, rowId, ws.doc, "two");
      expect(await reasonOf(serveSigned(first))).toBe("file_not_found");
      const second = await url();
      expect((await serveSigned(second)).bytes.toString()).toBe("two");
      await h.files.deleteFile({ rowId, fieldId: ws.doc }, await as(t.editor));
      expect(await reasonOf(serveSigned(second))).toBe("file_not_found");
      expect(await reasonOf(url())).toBe("file_not_found");
      await h.files.restoreFile({ rowId, fieldId: ws.doc }, await as(t.editor));
      expect(await reasonOf(serveSigned(second))).toBe("file_not_found");
      const third = await url();
      expect((await serveSigned(third)).bytes.toString()).toBe("two");

      // Another replica with a 2-second life: its token works on this one until it expires.
      const replica = await h.replica({ FILE_URL_TTL_SECONDS: "2" });
      try {
        const { token: short, expiresAt } = await replica.files.createFileUrl(
          { rowId, fieldId: ws.doc },
          await as(t.viewer),
        );
        expect((await serveSigned(short)).bytes.toString()).toBe("two");
        const wait = Number(expiresAt!.seconds) * 1000 - Date.now() + 50;
        await new Promise((resolve) => setTimeout(resolve, Math.max(wait, 0)));
        expect(await reasonOf(serveSigned(short))).toBe("file_not_found");
        expect(await reasonOf(collect(replica.files.serveSignedFile({ token: short })))).toBe(
          "file_not_found",
        );
      } finally {
        await replica.stop();
      }
    });

    it("keeps serving the same bytes after a rename, under the new name", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "kept bytes", { fileName: "before.txt" });
      const { token: signed } = await h.files.createFileUrl(
        { rowId, fieldId: ws.doc },
        await as(t.viewer),
      );
      await h.files.renameFile(
        { rowId, fieldId: ws.doc, fileName: "after.txt" },
        await as(t.editor),
      );
      const served = await collect(h.files.serveSignedFile({ token: signed }));
      expect(served.bytes.toString()).toBe("kept bytes");
      expect(served.header.file).toMatchObject({ fileName: "after.txt" });
    });

    it("dies with its record at once, before the files service applies the deletion", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "of a record about to go");
      const { token: signed } = await h.files.createFileUrl(
        { rowId, fieldId: ws.doc },
        await as(t.viewer),
      );
      const serveSigned = () => collect(h.files.serveSignedFile({ token: signed }));
      expect((await serveSigned()).bytes.toString()).toBe("of a record about to go");
      await holdingDeletions([{ kind: "row", id: rowId }], async () => {
        await h.records.deleteRecord({ tableId: ws.tableId, rowId }, await as(t.editor));
        // The files consumer waits for the lock: the file is still live in files' table.
        expect(await liveFiles("row_id", rowId)).toBe(1);
        expect(await reasonOf(serveSigned())).toBe("record_not_found");
      });
      await expect.poll(() => liveFiles("row_id", rowId)).toBe(0);
      expect(await reasonOf(serveSigned())).toBe("file_not_found");
    });

    it("dies with its table and its organization once records has let the records go", async () => {
      const local = await workspace(h, t.owner, t.organizationId);
      const rowId = await record(h, t.editor, local);
      await upload(t.editor, rowId, local.doc, "of a table about to go");
      const { token: signed } = await h.files.createFileUrl(
        { rowId, fieldId: local.doc },
        await as(t.viewer),
      );
      await holdingDeletions([{ kind: "table", id: local.tableId }], async () => {
        await h.catalog.deleteTable({ tableId: local.tableId }, await as(t.owner));
        await expect
          .poll(() => reasonOf(collect(h.files.serveSignedFile({ token: signed }))), {
            timeout: 10_000,
          })
          .toBe("record_not_found");
        expect(await liveFiles("table_id", local.tableId)).toBe(1);
      });

      const owner = await h.user("Leaving");
      const { organization } = await h.org.createOrganization(
        { name: "Leaving", organizationSlug: "" },
        await as(owner),
      );
      const organizationId = organization!.organizationId;
      const theirs = await workspace(h, owner, organizationId);
      const theirRow = await record(h, owner, theirs);
      await upload(owner, theirRow, theirs.doc, "of an organization about to go");
      const { token: theirLink } = await h.files.createFileUrl(
        { rowId: theirRow, fieldId: theirs.doc },
        await as(owner),
      );
      await holdingDeletions(
        [
          { kind: "organization", id: organizationId },
          { kind: "table", id: theirs.tableId },
        ],
        async () => {
          await h.org.deleteOrganization({ organizationId }, await as(owner));
          await expect
            .poll(() => reasonOf(collect(h.files.serveSignedFile({ token: theirLink }))), {
              timeout: 10_000,
            })
            .toBe("record_not_found");
          expect(await liveFiles("organization_id", organizationId)).toBe(1);
        },
      );
    });
  });

  describe("RenameFile", () => {
    it("renames the live file and audits the change", async () => {
      const rowId = await record(h, t.editor, ws);
      const uploaded = await upload(t.editor, rowId, ws.doc, "abc", { fileName: "old.txt" });
      const { file } = await h.files.renameFile(
        { rowId, fieldId: ws.doc, fileName: "  Quarterly report (final).txt " },
        await as(t.editor),
      );
      expect(file).toMatchObject({
        fileName: "Quarterly report (final).txt",
        sha256: uploaded.sha256,
        size: 3n,
      });
      expect((await serve(t.viewer, rowId, ws.doc)).header.file?.fileName).toBe(
        "Quarterly report (final).txt",
      );
      await expect
        .poll(
          () =>
            auditChangesOf(
              eventsOf(h.events, "audit.file.renamed", AuditEventSchema).find(
                (e) => e.target?.id === rowId,
              )?.changesJson ?? "",
            )[0]?.new,
        )
        .toBe("Quarterly report (final).txt");
    });

    it("refuses path tricks, control characters and bad lengths, changing nothing", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "abc", { fileName: "keep.txt" });
      for (const [fileName, message] of [
        ["../x", "must not contain '/' or '\\'"],
        ["a/b", "must not contain '/' or '\\'"],
        ["..\\x", "must not contain '/' or '\\'"],
        ["nul\u0000.txt", "must not contain control characters"],
        ["line\nbreak", "must not contain control characters"],
        ["", "must be 1-255 characters"],
        ["x".repeat(256), "must be 1-255 characters"],
        ["..", "must not be '.' or '..'"],
        ["\u200b\u2060", "must contain a visible character"],
      ] as const) {
        expect(
          await validationOf(
            h.files.renameFile({ rowId, fieldId: ws.doc, fileName }, await as(t.editor)),
          ),
        ).toEqual([{ key: "file_name", message, source: "body", code: expect.any(String) }]);
      }
      expect((await fileRows(rowId))[0].file_name).toBe("keep.txt");
      const { file } = await h.files.renameFile(
        { rowId, fieldId: ws.doc, fileName: "x".repeat(255) },
        await as(t.editor),
      );
      expect(file?.fileName).toHaveLength(255);
    });

    it("answers file_not_found for row 0, field 0 and a pair without a live file", async () => {
      const rowId = await record(h, t.editor, ws);
      const rename = async (r: bigint, f: bigint) =>
        h.files.renameFile({ rowId: r, fieldId: f, fileName: "x.txt" }, await as(t.editor));
      expect(await reasonOf(rename(0n, 0n))).toBe("file_not_found");
      expect(await reasonOf(rename(rowId, 0n))).toBe("file_not_found");
      expect(await reasonOf(rename(0n, ws.doc))).toBe("file_not_found");
      expect(await reasonOf(rename(rowId, ws.doc))).toBe("file_not_found");
    });
  });

  describe("DeleteFile and RestoreFile", () => {
    it("soft-deletes, restores, and swaps back to the replaced file", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "alpha", { fileName: "a.txt" });
      const usageBefore = await usage(t.organizationId);
      const { file: deleted } = await h.files.deleteFile(
        { rowId, fieldId: ws.doc },
        await as(t.editor),
      );
      expect(deleted).toMatchObject({ fileName: "a.txt" });
      expect(deleted?.deletedAt).toBeDefined();
      expect(await usage(t.organizationId)).toBe(usageBefore);
      expect(await reasonOf(serve(t.viewer, rowId, ws.doc))).toBe("file_not_found");
      expect(
        await reasonOf(h.files.deleteFile({ rowId, fieldId: ws.doc }, await as(t.editor))),
      ).toBe("file_not_found");
      const { files: listed } = await h.files.listRecordFiles(
        { rowIds: [rowId] },
        await as(SERVICE),
      );
      expect(listed).toEqual([]);

      const { file: restored } = await h.files.restoreFile(
        { rowId, fieldId: ws.doc },
        await as(t.editor),
      );
      expect(restored).toMatchObject({ fileName: "a.txt" });
      expect(restored?.deletedAt).toBeUndefined();
      expect((await serve(t.viewer, rowId, ws.doc)).bytes.toString()).toBe("alpha");
      expect(
        await reasonOf(h.files.restoreFile({ rowId, fieldId: ws.doc }, await as(t.editor))),
      ).toBe("file_not_found");

      await upload(t.editor, rowId, ws.doc, "beta", { fileName: "b.txt" });
      const swapped = await h.files.restoreFile({ rowId, fieldId: ws.doc }, await as(t.editor));
      expect(swapped.file?.fileName).toBe("a.txt");
      expect((await serve(t.viewer, rowId, ws.doc)).bytes.toString()).toBe("alpha");
      const back = await h.files.restoreFile({ rowId, fieldId: ws.doc }, await as(t.editor));
      expect(back.file?.fileName).toBe("b.txt");
      const rows = await fileRows(rowId);
      expect(rows.filter((r) => r.deleted_at === null).map((r) => r.file_name)).toEqual(["b.txt"]);
      await expect
        .poll(
          () =>
            eventsOf(h.events, "audit.file.restored", AuditEventSchema).filter(
              (e) => e.target?.id === rowId,
            ).length,
        )
        .toBe(3);
      expect(
        eventsOf(h.events, "audit.file.deleted", AuditEventSchema).some(
          (e) => e.target?.id === rowId && e.target.fieldId === ws.doc,
        ),
      ).toBe(true);
    });

    it("restores only what the field's options take now", async () => {
      const own = await workspace(h, t.owner, t.organizationId);
      const rowId = await record(h, t.editor, own);
      await upload(t.editor, rowId, own.picture, PNG);
      await h.files.deleteFile({ rowId, fieldId: own.picture }, await as(t.editor));
      const restore = async () =>
        h.files.restoreFile({ rowId, fieldId: own.picture }, await as(t.editor));
      const setOptions = async (options: JsonObject) => {
        await h.catalog.updateField({ fieldId: own.picture, options }, await as(t.owner));
      };
      const deletedAt = async () => (await fileRows(rowId)).map((r) => r.deleted_at !== null);

      await setOptions({ max_size: 1000, allowed_types: ["application/pdf"] });
      // Once files has the new options (its schema cache follows catalog's events).
      await expect
        .poll(async () => (await failureOf(restore())).reason, { timeout: 10_000 })
        .toBe("validation_failed");
      expect(await validationOf(restore())).toEqual([
        {
          key: "file",
          message: "is image/png, this field takes application/pdf",
          source: "query",
          code: "invalid_value",
        },
      ]);
      await setOptions({ max_size: 10, allowed_types: ["image/*"] });
      await expect
        .poll(async () => (await failureOf(restore())).reason, { timeout: 10_000 })
        .toBe("file_too_large");
      expect(await failureOf(restore())).toMatchObject({ metadata: { max_bytes: "10" } });
      expect(await deletedAt()).toEqual([true]);

      await setOptions({ max_size: 1000, allowed_types: ["image/*"] });
      await expect
        .poll(async () => (await restore()).file?.contentType, { timeout: 10_000 })
        .toBe("image/png");
      expect(await deletedAt()).toEqual([false]);
    });

    it("does not restore files past the 30 days", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "old");
      await h.files.deleteFile({ rowId, fieldId: ws.doc }, await as(t.editor));
      await h.db.query(
        "update files.file set deleted_at = now() - interval '30 days 1 minute' where row_id = $1",
        [rowId.toString()],
      );
      expect(
        await reasonOf(h.files.restoreFile({ rowId, fieldId: ws.doc }, await as(t.editor))),
      ).toBe("file_not_found");
      // It is the purge job's (which would take it on its next round anyway).
      await h.running.maintain();
      expect(await fileRows(rowId)).toEqual([]);
    });
  });

  describe("access", () => {
    let rowId: bigint;

    beforeAll(async () => {
      rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "shared");
    });

    it("lets read tokens and viewers read but not write", async () => {
      const read = token(t.organizationId, "read");
      expect((await serve(t.viewer, rowId, ws.doc)).bytes.toString()).toBe("shared");
      expect(
        (
          await collect(h.files.serveFile({ rowId, fieldId: ws.doc }, await as(read)))
        ).bytes.toString(),
      ).toBe("shared");
      const writes = async (who: TestUser | ReturnType<typeof token>) => {
        const call = await as(who);
        return Promise.all([
          reasonOf(upload(who, rowId, ws.doc, "x")),
          reasonOf(h.files.renameFile({ rowId, fieldId: ws.doc, fileName: "y" }, call)),
          reasonOf(h.files.deleteFile({ rowId, fieldId: ws.doc }, call)),
          reasonOf(h.files.restoreFile({ rowId, fieldId: ws.doc }, call)),
          reasonOf(h.files.storageCheck({ rowId, fileSize: 1n }, call)),
        ]);
      };
      expect(await writes(read)).toEqual(Array(5).fill("token_read_only"));
      expect(await writes(t.viewer)).toEqual(Array(5).fill("organization_forbidden"));
      // Field 0 names no file (file_not_found to a writer), but the right on the record comes
      // first, as for any other field id the caller may not write.
      const fieldZero = async (who: TestUser | ReturnType<typeof token>) => {
        const call = await as(who);
        return Promise.all([
          reasonOf(h.files.renameFile({ rowId, fieldId: 0n, fileName: "y" }, call)),
          reasonOf(h.files.deleteFile({ rowId, fieldId: 0n }, call)),
          reasonOf(h.files.restoreFile({ rowId, fieldId: 0n }, call)),
          reasonOf(h.files.renameFile({ rowId, fieldId: 123_456_789n, fileName: "y" }, call)),
        ]);
      };
      expect(await fieldZero(read)).toEqual(Array(4).fill("token_read_only"));
      expect(await fieldZero(t.viewer)).toEqual(Array(4).fill("organization_forbidden"));
      const readWrite = token(t.organizationId, "read_write");
      expect(
        await h.files.storageCheck({ rowId, fileSize: 1n }, await as(readWrite)),
      ).toBeDefined();
      expect((await serve(t.viewer, rowId, ws.doc)).bytes.toString()).toBe("shared");
    });

    it("answers record_not_found to other organizations, whatever they ask", async () => {
      const foreign = token(t.outsiderOrganizationId, "read_write");
      for (const who of [t.outsider, foreign] as const) {
        const call = await as(who);
        expect(
          await Promise.all([
            reasonOf(serve(t.outsider, rowId, ws.doc)),
            reasonOf(collect(h.files.serveFile({ rowId, fieldId: ws.doc }, call))),
            reasonOf(collect(h.files.serveFile({ rowId, fieldId: ws.name }, call))),
            reasonOf(upload(who, rowId, ws.doc, "x")),
            reasonOf(upload(who, rowId, 123_456_789n, "x")),
            reasonOf(h.files.createFileUrl({ rowId, fieldId: ws.doc }, call)),
            reasonOf(h.files.renameFile({ rowId, fieldId: ws.doc, fileName: "y" }, call)),
            reasonOf(h.files.deleteFile({ rowId, fieldId: ws.doc }, call)),
            reasonOf(h.files.restoreFile({ rowId, fieldId: ws.doc }, call)),
            reasonOf(h.files.storageCheck({ rowId, fileSize: 1n }, call)),
            reasonOf(h.files.renameFile({ rowId, fieldId: 0n, fileName: "y" }, call)),
            reasonOf(h.files.deleteFile({ rowId, fieldId: 0n }, call)),
          ]),
        ).toEqual(Array(12).fill("record_not_found"));
      }
    });

    it("needs a principal, and keeps the internal RPCs to services", async () => {
      const failure = await failureOf(collect(h.files.serveFile({ rowId, fieldId: ws.doc })));
      expect(failure).toMatchObject({ code: Code.Unauthenticated, reason: "unauthorized" });
      expect(await reasonOf(h.files.listRecordFiles({ rowIds: [rowId] }, await as(t.owner)))).toBe(
        "internal_only",
      );
      expect(
        await reasonOf(
          h.files.getStorageUsage({ organizationId: t.organizationId }, await as(t.owner)),
        ),
      ).toBe("internal_only");
      const { files } = await h.files.listRecordFiles(
        { rowIds: [rowId, 987_654_321n, rowId] },
        await as(SERVICE),
      );
      expect(files.map((f) => [f.rowId, f.fieldId, f.fileName])).toEqual([
        [rowId, ws.doc, "file.bin"],
      ]);
    });
  });

  describe("deletion sagas and the purge job", () => {
    async function keysOf(where: string, id: bigint): Promise<string[]> {
      const { rows } = await h.db.query(`select storage_key from files.file where ${where} = $1`, [
        id.toString(),
      ]);
      return rows.map((r) => r.storage_key);
    }

    async function expectGone(keys: string[]) {
      await expect
        .poll(async () => {
          const stored = await h.storedKeys();
          return keys.filter((k) => stored.has(k));
        })
        .toEqual([]);
    }

    it("deletes a deleted field's files, live and deleted, with their bytes and usage", async () => {
      const local = await workspace(h, t.owner, t.organizationId);
      const one = await record(h, t.editor, local);
      const two = await record(h, t.editor, local);
      await upload(t.editor, one, local.doc, "a1");
      await upload(t.editor, one, local.doc, "a22");
      await upload(t.editor, two, local.doc, "b333");
      await upload(t.editor, two, local.picture, PNG);
      const keys = await keysOf("field_id", local.doc);
      expect(keys).toHaveLength(3);
      const usageBefore = await usage(t.organizationId);
      await h.catalog.deleteField({ fieldId: local.doc }, await as(t.owner));
      await expect.poll(async () => (await keysOf("field_id", local.doc)).length).toBe(0);
      await expectGone(keys);
      expect(await usage(t.organizationId)).toBe(usageBefore - 9);
      expect((await keysOf("field_id", local.picture)).length).toBe(1);
      expect(await reasonOf(upload(t.editor, one, local.doc, "again"))).toBe("field_not_found");

      // A replayed event changes nothing.
      const eventId = crypto.randomUUID();
      await h.bus.publish(
        "catalog.field.deleted",
        toBinary(
          FieldDeletedSchema,
          create(FieldDeletedSchema, {
            meta: create(EventMetaSchema, { eventId, occurredAt: timestampNow() }),
            organizationId: t.organizationId,
            tableId: local.tableId,
            fieldId: local.doc,
          }),
        ),
        eventId,
      );
      // The consumer handles events in order: once the next deletion is done, so is the replay.
      const pictureKeys = await keysOf("field_id", local.picture);
      await h.catalog.deleteField({ fieldId: local.picture }, await as(t.owner));
      await expect.poll(async () => (await keysOf("field_id", local.picture)).length).toBe(0);
      await expectGone(pictureKeys);
      expect(await usage(t.organizationId)).toBe(usageBefore - 9 - PNG.length);
    });

    it("refuses an upload to a deleted field at once, before files applies its event", async () => {
      const local = await workspace(h, t.owner, t.organizationId);
      const [first, next] = [await record(h, t.editor, local), await record(h, t.editor, local)];
      // Files has read the table's schema, with the field, and cached it. (The upload goes to
      // another field: the deleted field's own files may go before its event is applied.)
      await upload(t.editor, first, local.picture, PNG);
      const before = await h.storedKeys();
      const deleted = () =>
        h.events.find(
          (e) =>
            e.subject === SUBJECTS.fieldDeleted &&
            fromBinary(FieldDeletedSchema, e.data).fieldId === local.doc,
        );
      await holdingEvents(async () => {
        await h.catalog.deleteField({ fieldId: local.doc }, await as(t.owner));
        await expect.poll(deleted).toBeDefined();
        expect(await applied(DURABLES.catalog, deleted()!.id)).toBe(false);
        expect(await reasonOf(upload(t.editor, next, local.doc, "late"))).toBe("field_not_found");
        await expectNothingLeft(next, before);
        expect(await applied(DURABLES.catalog, deleted()!.id)).toBe(false);
      });
      await expect.poll(() => applied(DURABLES.catalog, deleted()!.id)).toBe(true);
    });

    it("deletes the files of a deleted table and of a deleted database", async () => {
      const local = await workspace(h, t.owner, t.organizationId);
      const rowId = await record(h, t.editor, local);
      await upload(t.editor, rowId, local.doc, "table file");
      const tableKeys = await keysOf("table_id", local.tableId);
      await h.catalog.deleteTable({ tableId: local.tableId }, await as(t.owner));
      await expect.poll(async () => (await keysOf("table_id", local.tableId)).length).toBe(0);
      await expectGone(tableKeys);

      const other = await workspace(h, t.owner, t.organizationId);
      const otherRow = await record(h, t.editor, other);
      await upload(t.editor, otherRow, other.doc, "database file");
      await upload(t.editor, otherRow, other.picture, PNG);
      const databaseKeys = await keysOf("table_id", other.tableId);
      expect(databaseKeys).toHaveLength(2);
      await h.catalog.deleteDatabase({ databaseId: other.databaseId }, await as(t.owner));
      await expect.poll(async () => (await keysOf("table_id", other.tableId)).length).toBe(0);
      await expectGone(databaseKeys);
    });

    it("deletes the files of deleted records with their bytes and usage, and closes the rows to uploads", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "replaced");
      await upload(t.editor, rowId, ws.doc, "record file");
      await upload(t.editor, rowId, ws.picture, PNG);
      const keys = (await fileRows(rowId)).map((r) => r.storage_key as string);
      expect(keys).toHaveLength(3);
      const usageBefore = await usage(t.organizationId);
      await h.records.deleteRecord({ tableId: ws.tableId, rowId }, await as(t.editor));
      // The replaced file goes too: none of them can be restored once the record is gone.
      await expect.poll(async () => (await fileRows(rowId)).length).toBe(0);
      await expectGone(keys);
      expect(await usage(t.organizationId)).toBe(
        usageBefore - "replaced".length - "record file".length - PNG.length,
      );
      expect(await reasonOf(serve(t.viewer, rowId, ws.doc))).toBe("record_not_found");
      expect(
        await reasonOf(h.files.restoreFile({ rowId, fieldId: ws.doc }, await as(t.editor))),
      ).toBe("record_not_found");
      const { files } = await h.files.listRecordFiles({ rowIds: [rowId] }, await as(SERVICE));
      expect(files).toEqual([]);
      const { rows } = await h.db.query(
        "select 1 from files.deleted_scope where kind = 'row' and id = $1",
        [rowId.toString()],
      );
      expect(rows).toHaveLength(1);

      const batch = await Promise.all([record(h, t.editor, ws), record(h, t.editor, ws)]);
      for (const id of batch) await upload(t.editor, id, ws.doc, "batch file");
      const kept = await record(h, t.editor, ws);
      await upload(t.editor, kept, ws.doc, "kept");
      await h.records.batchDeleteRecords(
        { tableId: ws.tableId, rowIds: batch },
        await as(t.editor),
      );
      await expect
        .poll(async () => (await fileRows(batch[0]!)).length + (await fileRows(batch[1]!)).length)
        .toBe(0);
      expect(await fileRows(kept)).toHaveLength(1);
    });

    it("purges files deleted more than 30 days ago, bytes, rows and usage", async () => {
      const rowId = await record(h, t.editor, ws);
      await upload(t.editor, rowId, ws.doc, "to purge");
      await upload(t.editor, rowId, ws.doc, "recently replaced");
      await upload(t.editor, rowId, ws.doc, "live");
      const [old, recent, live] = await fileRows(rowId);
      await h.db.query(
        "update files.file set deleted_at = now() - interval '31 days' where id = $1",
        [old.id],
      );
      const usageBefore = await usage(t.organizationId);
      const result = await h.running.maintain();
      expect(result.purged).toBeGreaterThanOrEqual(1);
      expect((await fileRows(rowId)).map((r) => r.id)).toEqual([recent.id, live.id]);
      await expectGone([old.storage_key]);
      const stored = await h.storedKeys();
      expect(stored.has(recent.storage_key)).toBe(true);
      expect(stored.has(live.storage_key)).toBe(true);
      expect(await usage(t.organizationId)).toBe(usageBefore - 8);
      expect((await h.running.maintain()).purged).toBe(0);
    });

    it("deletes everything of a deleted organization", async () => {
      const owner = await h.user("Leaving");
      const { organization } = await h.org.createOrganization(
        { name: "Leaving", organizationSlug: "" },
        await as(owner),
      );
      const organizationId = organization!.organizationId;
      const local = await workspace(h, owner, organizationId);
      const rowId = await record(h, owner, local);
      await upload(owner, rowId, local.doc, "org file");
      await upload(owner, rowId, local.doc, "org file 2");
      const keys = await keysOf("organization_id", organizationId);
      expect(keys).toHaveLength(2);
      expect(await usage(organizationId)).toBe(18);
      await h.org.deleteOrganization({ organizationId }, await as(owner));
      await expect
        .poll(async () => (await keysOf("organization_id", organizationId)).length)
        .toBe(0);
      await expectGone(keys);
      await expect.poll(() => usage(organizationId)).toBe(0);
      const { rows } = await h.db.query(
        "select * from files.storage_usage where organization_id = $1",
        [organizationId.toString()],
      );
      expect(rows).toEqual([]);
    });
  });
}
