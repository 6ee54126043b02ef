import { type Authorizer, type Call, errorInfoOf, type Permission, type Role } from "@rowbase/kit";
import { linkOptionsOf } from "@rowbase/kit/field-types";
import type { LinkedSchemas } from "./db/user-tables/link-values.js";
import { tableNotFound } from "./errors.js";
import type { SchemaField, TableSchema, TableSchemas } from "./table-schema.js";

export interface TableAccess {
  schema: TableSchema;
  role: Role;
}

/**
 * Finds a table and checks the caller's right there through kit's Authorizer:
 * a missing table, one outside the named database and one of another organization are the same
 * 404 `table_not_found`; a read token writing gets `token_read_only`, a viewer
 * `organization_forbidden`. `fresh`: the schema is read from catalog, not from the caches.
 * A public form's principal passes only for `create` in the form's own table; anything else it
 * asks for is the same 404.
 */
export class Access {
  constructor(
    private readonly schemas: TableSchemas,
    private readonly authorizer: Authorizer,
  ) {}

  /**
   * A table's schema for another service (a service principal), which reads any table without a
   * role: the webhooks service follows the change logs of the tables its webhooks belong to,
   * having authorized their creators itself.
   */
  async tableForService(call: Call, tableId: bigint, databaseId: bigint): Promise<TableSchema> {
    if (call.principal.kind !== "service") throw tableNotFound();
    const schema = await this.schemas.get(tableId, call.requestId);
    if (databaseId !== 0n && schema.databaseId !== databaseId) throw tableNotFound();
    return schema;
  }

  async table(
    call: Call,
    tableId: bigint,
    databaseId: bigint,
    permission: Permission,
    options: { fresh?: boolean; create?: boolean } = {},
  ): Promise<TableAccess> {
    const schema = options.fresh
      ? await this.schemas.fresh(tableId, call.requestId)
      : await this.schemas.get(tableId, call.requestId);
    if (databaseId !== 0n && schema.databaseId !== databaseId) throw tableNotFound();
    const { principal } = call;
    if (principal.kind === "form") {
      const own =
        principal.tableId === schema.tableId && principal.organizationId === schema.organizationId;
      if (!options.create || !own) throw tableNotFound();
      return { schema, role: "editor" };
    }
    const role = await this.authorizer.authorize(
      call.principal,
      schema.organizationId,
      permission,
      "table_not_found",
    );
    return { schema, role };
  }

  /**
   * The fields of the tables `schema`'s link fields link to (its lookups and rollups read
   * through those links), by table id; empty for a table without links. A linked table that
   * is gone, or of another organization (which catalog never links), is left out: its records
   * then show by row id. Read with the caller's rights on `schema` alone: a link shows what the
   * linked records are called, as the table's own record does.
   */
  async linked(schema: TableSchema, requestId: string): Promise<LinkedSchemas> {
    const ids = new Set<bigint>();
    for (const field of schema.fields) {
      if (field.type !== "link") continue;
      const options = linkOptionsOf(field.options);
      if (options) ids.add(options.tableId);
    }
    const linked = new Map<string, readonly SchemaField[]>();
    for (const tableId of ids) {
      if (tableId === schema.tableId) {
        linked.set(tableId.toString(), schema.fields);
        continue;
      }
      try {
        const target = await this.schemas.get(tableId, requestId);
        if (target.organizationId === schema.organizationId) {
          linked.set(tableId.toString(), target.fields);
        }
      } catch (error) {
        if (errorInfoOf(error)?.reason !== "table_not_found") throw error;
      }
    }
    return linked;
  }
}
