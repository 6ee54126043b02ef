import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import type { Principal } from "@rowbase/kit";
import {
  as,
  eventsOf,
  failureOf,
  reasonOf,
  type TestStack,
  validationOf,
} from "@rowbase/kit/testing";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import {
  createTestTeam,
  startTestServices,
  type TestTeam,
  type TestUser,
} from "@rowbase/standalone/testing";
import type pg from "pg";
import { expect } from "vitest";
import { migrateCatalog } from "../src/index.js";

export type { TestUser };
export { as, eventsOf, failureOf, reasonOf, validationOf };

export interface Harness extends Pick<TestStack, "db" | "cache" | "bus" | "logger" | "events"> {
  catalog: Client<typeof CatalogService>;
  org: Client<typeof OrganizationService>;
  /** A registered user with a verified e-mail. */
  user(name?: string): Promise<TestUser>;
  stop(): Promise<void>;
}

/** Another Rowbase service, as records and files call catalog. */
export const SERVICE: Principal = { kind: "service", service: "records" };

/** The `{key, message}` list of an invalid_field_options error. */
export async function optionErrorsOf(
  call: Promise<unknown>,
): Promise<{ key: string; message: string }[]> {
  const failure = await failureOf(call);
  expect(failure.reason).toBe("invalid_field_options");
  expect(failure.code).toBe(3); // InvalidArgument
  return JSON.parse(failure.metadata.errors ?? "[]");
}

/** Waits until a matching event of `subject` arrived, and returns it. */
export async function eventOf<D extends DescMessage>(
  h: Harness,
  subject: string,
  schema: D,
  matches: (event: MessageShape<D>) => boolean,
): Promise<MessageShape<D>> {
  await expect.poll(() => eventsOf(h.events, subject, schema).some(matches)).toBe(true);
  return eventsOf(h.events, subject, schema).find(matches)!;
}

/** Everything catalog stores for an organization plus the outbox size. */
export async function stateOf(db: pg.Pool, organizationId: bigint): Promise<unknown> {
  const id = organizationId.toString();
  const rows = async (sql: string) => (await db.query(sql, [id])).rows;
  return {
    databases: await rows("select * from catalog.databases where organization_id = $1 order by id"),
    tables: await rows(
      `select t.* from catalog.tables t join catalog.databases d on d.id = t.database_id
       where d.organization_id = $1 order by t.id`,
    ),
    fields: await rows(
      `select f.* from catalog.fields f join catalog.tables t on t.id = f.table_id
       join catalog.databases d on d.id = t.database_id
       where d.organization_id = $1 order by f.id`,
    ),
    outbox: (await db.query("select count(*)::int as n from catalog.outbox")).rows[0].n,
  };
}

/**
 * The real identity, organization and catalog services against one fresh database, Redis under
 * a unique prefix, NATS under a unique namespace and a mail catcher for verification codes.
 */
export async function startHarness(): Promise<Harness> {
  const services = await startTestServices({
    through: "catalog",
    record: ["CATALOG", "ORG", "AUDIT"],
  });
  const { stack } = services;
  expect(services.migrated.catalog).toEqual([
    "InitialSchema",
    "ProcessedEvents",
    "NameKeys",
    "SchemaVersion",
    "Forms",
    "RelationalFields",
  ]);
  expect(await migrateCatalog(stack.databaseUrl)).toEqual([]);
  return {
    catalog: services.client("catalog"),
    org: services.client("organization"),
    db: stack.db,
    cache: stack.cache,
    bus: stack.bus,
    logger: stack.logger,
    events: stack.events,
    user: (name = "Ada") => services.user(name),
    stop: () => services.stop(),
  };
}

export type Team = TestTeam<"admin" | "editor" | "viewer">;

/**
 * An organization on the plus plan with a member of each role, and an outsider who owns an
 * organization of their own.
 */
export const team = (h: Harness): Promise<Team> =>
  createTestTeam(h.org, h.user, ["admin", "editor", "viewer"]);
