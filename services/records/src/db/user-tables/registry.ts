import type { EntityManager } from "@mikro-orm/postgresql";
import { hasSqlState, query, type TableSchema } from "@rowbase/kit";
import { tableNotFound } from "../../errors.js";
import { findHome } from "../reads.js";
import { RECORD_ROWS, type TableRows } from "../rows.js";
import type { LinkedSchemas } from "./link-values.js";
import { userTable } from "./names.js";
import { userTableRows } from "./table-rows.js";

/**
 * Which storage holds a table's records: its user table once `user_table` names it (every table
 * created since the per-table storage, and every older one the upgrade has moved), else the
 * jsonb `record` table. A table never goes back, so the tables found registered are remembered
 * for the life of the process and asked about once; a table still in `record` is asked about on
 * every call, until it moves.
 *
 * Once the upgrade has dropped `record` (src/upgrade.ts), every table catalog has is registered,
 * and a table that is not is one catalog no longer has: `rowsOf` answers table_not_found for it,
 * and nothing reads or writes `record` any more. A `record` found gone is remembered too.
 */
export class StoredTables {
  /** The registered tables found, with their organizations. */
  private readonly registered = new Map<bigint, bigint>();
  private recordDropped = false;

  constructor(private readonly em: () => EntityManager) {}

  async inUserTable(tableId: bigint): Promise<boolean> {
    return (await this.userTableOf(tableId)) !== undefined;
  }

  /** The table's user table; undefined while it is stored in `record` (or does not exist). */
  async userTableOf(
    tableId: bigint,
  ): Promise<{ organizationId: bigint; tableId: bigint } | undefined> {
    let organizationId = this.registered.get(tableId);
    if (organizationId === undefined) {
      const [row] = await query<{ organization_id: string | null; dropped: boolean }>(
        this.em(),
        `select (select organization_id from user_table where table_id = $1) as organization_id,
           to_regclass('record') is null as dropped`,
        [tableId],
        { prepare: true },
      );
      if (row?.dropped) this.recordDropped = true;
      if (!row?.organization_id) return undefined;
      organizationId = BigInt(row.organization_id);
      this.registered.set(tableId, organizationId);
    }
    return { organizationId, tableId };
  }

  /**
   * Whether the upgrade has dropped `record`: then no table is stored there, and the jsonb
   * storage's handling of a table that is not registered has nothing to do.
   */
  async recordGone(): Promise<boolean> {
    if (!this.recordDropped) {
      const [row] = await query<{ dropped: boolean }>(
        this.em(),
        "select to_regclass('record') is null as dropped",
      );
      this.recordDropped = row?.dropped === true;
    }
    return this.recordDropped;
  }

  /**
   * The statements' view of the table's records, in whichever storage holds them;
   * table_not_found for a table not registered once `record` is gone. `linked`: the fields of
   * the tables its links name (`Access.linked`), for their values.
   */
  async rowsOf(schema: TableSchema, linked?: LinkedSchemas): Promise<TableRows> {
    if (await this.inUserTable(schema.tableId)) {
      return userTableRows(schema.organizationId, schema.tableId, schema.fields, linked);
    }
    if (this.recordDropped) throw tableNotFound();
    return RECORD_ROWS;
  }

  /**
   * The table and organization of the record with this row id, in whichever storage holds it
   * (`findHome`); once `record` is gone, found through the user tables' row ranges alone.
   */
  async homeOf(rowId: bigint): Promise<{ tableId: bigint; organizationId: bigint } | undefined> {
    if (!(await this.recordGone())) {
      try {
        return await findHome(this.em(), rowId);
      } catch (error) {
        // `record` dropped while the statement waited for it.
        if (!hasSqlState(error, "42P01") || !(await this.recordGone())) throw error;
      }
    }
    const homes = await query<{ table_id: string; organization_id: string }>(
      this.em(),
      `select u.table_id, u.organization_id from row_range r join user_table u using (table_id)
       where r.ids @> $1::bigint`,
      [rowId],
      { prepare: true },
    );
    for (const home of homes) {
      const found = {
        tableId: BigInt(home.table_id),
        organizationId: BigInt(home.organization_id),
      };
      try {
        const rows = await query(
          this.em(),
          `select 1 from ${userTable(found.organizationId, found.tableId)} where row_id = $1`,
          [rowId],
        );
        if (rows.length > 0) return found;
      } catch (error) {
        // The table was dropped since its range was read.
        if (!hasSqlState(error, "42P01")) throw error;
      }
    }
    return undefined;
  }
}
