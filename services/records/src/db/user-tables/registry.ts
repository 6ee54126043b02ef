import type { EntityManager } from "@mikro-orm/postgresql";
import { query, type TableSchema } from "@rowbase/kit";
import { RECORD_ROWS, type TableRows } from "../rows.js";
import { userTableRows } from "./table-rows.js";

/**
 * Which storage holds a table's records: its user table once `user_table` names it (every table
 * created since the per-table storage, and every older one the upgrade has moved), else the
 * jsonb `record` table. A table never goes back, so the tables found registered are remembered
 * for the life of the process and asked about once; a table still in `record` is asked about on
 * every call, until it moves.
 */
export class StoredTables {
  /** The registered tables found, with their organizations. */
  private readonly registered = new Map<bigint, bigint>();

  constructor(private readonly em: () => EntityManager) {}

  async inUserTable(tableId: bigint): Promise<boolean> {
    return (await this.userTableOf(tableId)) !== undefined;
  }

  /** The table's user table; undefined while it is stored in `record`. */
  async userTableOf(
    tableId: bigint,
  ): Promise<{ organizationId: bigint; tableId: bigint } | undefined> {
    let organizationId = this.registered.get(tableId);
    if (organizationId === undefined) {
      const [row] = await query<{ organization_id: string }>(
        this.em(),
        "select organization_id from user_table where table_id = $1",
        [tableId],
        { prepare: true },
      );
      if (!row) return undefined;
      organizationId = BigInt(row.organization_id);
      this.registered.set(tableId, organizationId);
    }
    return { organizationId, tableId };
  }

  /** The statements' view of the table's records, in whichever storage holds them. */
  async rowsOf(schema: TableSchema): Promise<TableRows> {
    return (await this.inUserTable(schema.tableId))
      ? userTableRows(schema.organizationId, schema.tableId, schema.fields)
      : RECORD_ROWS;
  }
}
