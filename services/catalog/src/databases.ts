import { LockMode } from "@mikro-orm/postgresql";
import { type Call, changesBetween, SUBJECTS, valuesRemoved, valuesSet } from "@rowbase/kit";
import {
  DatabaseCreatedSchema,
  DatabaseDeletedSchema,
  DatabaseUpdatedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { type Access, notFound } from "./access.js";
import type { ChangeSet, Transactions } from "./change-set.js";
import {
  lockOrganizationExclusive,
  lockOrganizationShared,
  organizationDeleted,
  organizationFull,
} from "./db/constraints.js";
import { Database, type DatabaseRow } from "./db/entities.js";
import { requiredDescription, requiredName } from "./domain/validation.js";
import { databaseLimitExceeded } from "./errors.js";

/**
 * Deletes a locked database with its tables (their fields follow by foreign key) and announces
 * it once, naming every table, since records and files know tables rather than databases.
 */
async function deleteDatabaseRows(changes: ChangeSet, database: DatabaseRow): Promise<bigint[]> {
  const { em } = changes;
  const rows = await em.execute<{ id: string }[]>(
    "delete from tables where database_id = ? returning id",
    [database.id],
  );
  await em.nativeDelete(Database, { id: database.id });
  const tableIds = rows.map((row) => BigInt(row.id)).sort((a, b) => (a < b ? -1 : 1));
  await changes.publish(SUBJECTS.databaseDeleted, DatabaseDeletedSchema, {
    organizationId: database.organizationId,
    databaseId: database.id,
    tableIds,
  });
  return tableIds;
}

/** Databases: the named groups of tables inside an organization. */
export class Databases {
  constructor(private readonly deps: { tx: Transactions; access: Access }) {}

  /**
   * Creates a database in an organization the caller may write in. Names may repeat within an
   * organization (see the migration).
   */
  async create(
    call: Call,
    organizationId: bigint,
    rawName: string,
    rawDescription: string,
  ): Promise<DatabaseRow> {
    const name = requiredName(rawName);
    const description = requiredDescription(rawDescription);
    await this.deps.access.organization(call.principal, organizationId, "write");
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      await lockOrganizationShared(em, organizationId);
      if (await organizationDeleted(em, organizationId)) throw notFound("organization_not_found");
      if (await organizationFull(em, organizationId)) throw databaseLimitExceeded();
      const database = em.create(Database, { organizationId, name, description });
      await em.flush();
      await changes.publish(SUBJECTS.databaseCreated, DatabaseCreatedSchema, {
        organizationId,
        databaseId: database.id,
        name,
      });
      await changes.audit(
        { organizationId, databaseId: database.id },
        "database.created",
        { type: "database", id: database.id },
        valuesSet({ name, description }),
      );
      return database;
    });
  }

  /**
   * A database the caller may read. Other services (service principals) get any database, so
   * that they can find its organization before they authorize.
   */
  async get(call: Call, databaseId: bigint): Promise<DatabaseRow> {
    const em = this.deps.tx.em();
    if (call.principal.kind === "service") {
      const database = await em.findOne(Database, { id: databaseId });
      if (!database) throw notFound("database_not_found");
      return database;
    }
    return (await this.deps.access.database(em, call.principal, databaseId, "read")).database;
  }

  /** The organization's databases, oldest first. */
  async list(call: Call, organizationId: bigint): Promise<DatabaseRow[]> {
    await this.deps.access.organization(call.principal, organizationId, "read");
    return this.deps.tx.em().find(Database, { organizationId }, { orderBy: { id: "asc" } });
  }

  async update(
    call: Call,
    databaseId: bigint,
    patch: { name?: string | undefined; description?: string | undefined },
  ): Promise<DatabaseRow> {
    const name = patch.name === undefined ? undefined : requiredName(patch.name);
    const description =
      patch.description === undefined ? undefined : requiredDescription(patch.description);
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { database } = await this.deps.access.database(
        em,
        call.principal,
        databaseId,
        "write",
        "update",
      );
      const before = { name: database.name, description: database.description };
      if (name !== undefined) database.name = name;
      if (description !== undefined) database.description = description;
      const changed = changesBetween(before, {
        name: database.name,
        description: database.description,
      });
      if (changed.length === 0) return database;
      await em.flush();
      await changes.publish(SUBJECTS.databaseUpdated, DatabaseUpdatedSchema, {
        organizationId: database.organizationId,
        databaseId,
        name: database.name,
      });
      await changes.audit(
        { organizationId: database.organizationId, databaseId },
        "database.updated",
        { type: "database", id: databaseId },
        changed,
      );
      return database;
    });
  }

  /** Deletes a database with its tables and fields; records and files follow the event. */
  async delete(call: Call, databaseId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { database } = await this.deps.access.database(
        changes.em,
        call.principal,
        databaseId,
        "write",
        "update",
      );
      const tableIds = await deleteDatabaseRows(changes, database);
      await changes.audit(
        { organizationId: database.organizationId, databaseId },
        "database.deleted",
        { type: "database", id: databaseId },
        valuesRemoved({
          name: database.name,
          description: database.description,
          table_ids: tableIds.map((id) => Number(id)),
        }),
      );
    });
  }
}

/**
 * The catalog step of the organization deletion saga, in the change set's transaction: deletes
 * every database of the organization, announcing each as a user's delete would, and marks the
 * organization deleted so that a create racing this cannot leave one behind. Returns how many
 * databases went. Safe to repeat: a replayed event finds nothing left and announces nothing. No
 * audit events: the organization's audit log goes with it.
 */
export async function deleteOrganizationDatabases(
  changes: ChangeSet,
  organizationId: bigint,
): Promise<number> {
  const { em } = changes;
  await lockOrganizationExclusive(em, organizationId);
  await em.execute(
    "insert into deleted_organizations (organization_id) values (?) on conflict do nothing",
    [organizationId],
  );
  const databases = await em.find(
    Database,
    { organizationId },
    { orderBy: { id: "asc" }, lockMode: LockMode.PESSIMISTIC_WRITE },
  );
  for (const database of databases) await deleteDatabaseRows(changes, database);
  return databases.length;
}
