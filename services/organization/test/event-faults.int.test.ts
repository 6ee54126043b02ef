import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { type NatsServerProcess, startNatsServer } from "@rowbase/kit/testing";
import { Role, TokenAccess } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { as, type Harness, newOrganization, startHarness } from "./harness.js";

// A NATS server of this test's own, which it crashes and starts again: the services' outbox
// must keep every write's events while it is down and deliver them, each applied once, after.
let nats: NatsServerProcess;
let h: Harness;

beforeAll(async () => {
  nats = await startNatsServer();
  h = await startHarness({}, { natsUrl: nats.url });
});

afterAll(async () => {
  if (nats && !nats.running) await nats.start();
  await h?.stop();
  await nats?.close();
});

async function scalar(sql: string, params: unknown[] = []): Promise<number> {
  return Number((await h.db.query(sql, params)).rows[0].n);
}

/** The audit events in the outbox (every one this database ever produced) and in the store. */
async function auditIds() {
  const outbox = await h.db.query(
    "select event_id::text as id from organization.outbox where subject like 'audit.%' order by 1",
  );
  const stored = await h.db.query("select event_id as id from organization.audit_event order by 1");
  const processed = await h.db.query(
    `select event_id as id from organization.processed_event
     where consumer = 'organization_audit' order by 1`,
  );
  const ids = (result: { rows: { id: string }[] }) => result.rows.map((r) => r.id);
  return { outbox: ids(outbox), stored: ids(stored), processed: ids(processed) };
}

describe("NATS outage", () => {
  it("keeps writes working while NATS is down, then delivers every event exactly once", async () => {
    const owner = await h.user("Steady");
    const organization = await newOrganization(h, owner, "Steady");
    const organizationId = organization.organizationId;
    await expect.poll(async () => (await auditIds()).stored.length, { timeout: 10_000 }).toBe(2);

    await nats.stop();

    // Writes succeed without NATS: their events wait in the outbox.
    const invited = [await h.user("Invited"), await h.user("Invited too")];
    for (const user of invited) {
      await h.org.createInvite(
        { organizationId, email: user.email, role: Role.EDITOR },
        await as(owner),
      );
    }
    const tokens = [];
    for (const name of ["During", "Outage"]) {
      const { apiToken } = await h.org.createApiToken(
        { organizationId, name, access: TokenAccess.READ },
        await as(owner),
      );
      tokens.push(apiToken!.tokenId);
    }
    await h.org.revokeApiToken({ organizationId, tokenId: tokens[0]! }, await as(owner));
    await h.org.updateOrganization({ organizationId, name: "Still Steady" }, await as(owner));
    const { organization: renamed } = await h.org.getOrganization(
      { lookup: { case: "organizationId", value: organizationId } },
      await as(owner),
    );
    expect(renamed!.name).toBe("Still Steady");

    // Two invites, two tokens, a revocation and a rename: six audit events, none delivered.
    await new Promise((r) => setTimeout(r, 1500));
    const pending = await scalar(
      "select count(*) as n from organization.outbox where published_at is null and subject like 'audit.%'",
    );
    expect(pending).toBe(6);
    expect((await auditIds()).stored).toHaveLength(2);

    await nats.start();

    await expect
      .poll(
        async () =>
          scalar("select count(*) as n from organization.outbox where published_at is null"),
        { timeout: 30_000 },
      )
      .toBe(0);
    await expect.poll(async () => (await auditIds()).stored.length, { timeout: 30_000 }).toBe(8);
    // Let any redelivery or republish arrive; it must not be applied again.
    await new Promise((r) => setTimeout(r, 2000));
    const { outbox, stored, processed } = await auditIds();
    expect(outbox).toHaveLength(8);
    expect(stored).toEqual(outbox);
    expect(processed).toEqual(outbox);

    const { events, total } = await h.org.listAuditEvents(
      { scope: { case: "organizationId", value: organizationId }, limit: 100 },
      await as(owner),
    );
    expect(total).toBe(8n);
    expect(events.map((e) => e.action).sort()).toEqual([
      "api_token.created",
      "api_token.created",
      "api_token.revoked",
      "invite.created",
      "invite.created",
      "member.added",
      "organization.created",
      "organization.updated",
    ]);

    // Every outbox event (ORG stream too) reaches the harness's plain consumer. It takes them in
    // order, one at a time: an acknowledgement the restart lost holds it for an ack wait.
    const { rows } = await h.db.query("select event_id::text as id from organization.outbox");
    const undelivered = () => {
      const delivered = new Set(h.events.map((e) => e.id));
      return rows.filter((r) => !delivered.has(r.id));
    };
    await expect.poll(undelivered, { timeout: 30_000 }).toEqual([]);
  });

  it("applies nothing twice when a reset consumer replays the whole stream", async () => {
    const before = await auditIds();
    expect(before.stored.length).toBeGreaterThan(0);
    const nc = await connect({ servers: nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      const names: string[] = [];
      for await (const info of jsm.streams.list()) names.push(info.config.name);
      const audit = names.find((name) => name.endsWith("_AUDIT"))!;
      // An operator resets the consumer; a second replica starting up creates it again, and it
      // starts over from the first message of the stream.
      await jsm.consumers.delete(audit, "organization_audit");
      const replica = await h.replica();
      try {
        await expect
          .poll(
            async () => {
              const info = await jsm.consumers.info(audit, "organization_audit");
              return (
                info.delivered.stream_seq >= before.stored.length &&
                info.num_ack_pending === 0 &&
                info.num_pending === 0
              );
            },
            { timeout: 30_000 },
          )
          .toBe(true);
      } finally {
        await replica.stop();
      }
    } finally {
      await nc.close();
    }
    expect(await auditIds()).toEqual(before);
  });
});
