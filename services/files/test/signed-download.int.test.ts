import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  collect,
  type Harness,
  reasonOf,
  record,
  startHarness,
  type Team,
  team,
  uploadMessages,
  type Workspace,
  workspace,
} from "./harness.js";

/**
 * What a signed download asks the other services: the table's schema and the organization's
 * plan through the entries shared with records and the gateway (catalog and organization mark
 * them when a change or deletion commits), the record's existence from records each time.
 */
describe("ServeSignedFile and the shared caches", () => {
  let h: Harness;
  let t: Team;
  let ws: Workspace;

  beforeAll(async () => {
    h = await startHarness("directory");
    t = await team(h);
    ws = await workspace(h, t.owner, t.organizationId);
  });

  afterAll(async () => {
    await h?.stop();
  });

  async function signedFile(content: string): Promise<string> {
    const rowId = await record(h, t.editor, ws);
    await h.files.uploadFile(
      uploadMessages({ rowId, fieldId: ws.doc }, content),
      await as(t.editor),
    );
    const { token: signed } = await h.files.createFileUrl(
      { rowId, fieldId: ws.doc },
      await as(t.viewer),
    );
    return signed;
  }

  /** Runs `body` while the files service cannot apply the deletion of the field's files. */
  async function holdingFieldDeletion(fieldId: bigint, body: () => Promise<void>) {
    const client = await h.db.connect();
    try {
      await client.query("begin");
      await client.query("select pg_advisory_xact_lock_shared(hashtextextended($1, 0))", [
        `files.field:${fieldId}`,
      ]);
      await body();
    } finally {
      await client.query("rollback");
      client.release();
    }
  }

  it("reads the table's schema from the shared entry, not from catalog", async () => {
    const signed = await signedFile("served without catalog");
    // A replica that cannot reach catalog: the schema the upload cached is all it has.
    const replica = await h.replica({ CATALOG_GRPC_URL: "http://127.0.0.1:1" });
    try {
      const served = await collect(replica.files.serveSignedFile({ token: signed }));
      expect(served.bytes.toString()).toBe("served without catalog");
    } finally {
      await replica.stop();
    }
  });

  it("reads the organization's plan from the shared entry, not from organization", async () => {
    const signed = await signedFile("served without organization");
    expect((await collect(h.files.serveSignedFile({ token: signed }))).bytes.toString()).toBe(
      "served without organization",
    );
    // A replica that cannot reach organization: the plan already read is all it has.
    const replica = await h.replica({ ORGANIZATION_GRPC_URL: "http://127.0.0.1:1" });
    try {
      const served = await collect(replica.files.serveSignedFile({ token: signed }));
      expect(served.bytes.toString()).toBe("served without organization");
    } finally {
      await replica.stop();
    }
  });

  it("still ends the link with its field at once, before files applies the deletion", async () => {
    const local = await workspace(h, t.owner, t.organizationId);
    const rowId = await record(h, t.editor, local);
    await h.files.uploadFile(
      uploadMessages({ rowId, fieldId: local.doc }, "of a field about to go"),
      await as(t.editor),
    );
    const { token: signed } = await h.files.createFileUrl(
      { rowId, fieldId: local.doc },
      await as(t.viewer),
    );
    const serveSigned = () => collect(h.files.serveSignedFile({ token: signed }));
    expect((await serveSigned()).bytes.toString()).toBe("of a field about to go");
    await holdingFieldDeletion(local.doc, async () => {
      await h.catalog.deleteField({ fieldId: local.doc }, await as(t.owner));
      expect(await reasonOf(serveSigned())).toBe("file_not_found");
      const { rows } = await h.db.query(
        "select count(*)::int as n from files.file where field_id = $1 and deleted_at is null",
        [local.doc.toString()],
      );
      expect(rows[0].n).toBe(1);
    });
  });
});
