import { Migration } from "@mikro-orm/migrations";
import { foldName } from "@rowbase/kit/field-types";

const PAGE = 5_000;

/**
 * Table and field names are unique regardless of case by `name_key`, the name folded by
 * `foldName` (the kit's one rule, which records resolves references by), instead of by
 * PostgreSQL's lower(name), which follows the database's collation: under C.UTF-8 it made "İ"
 * and "i" one name while records told "İ" and "i̇" apart from neither, and under C it folds
 * ASCII only. The key is computed here, where the rule lives, not in SQL.
 *
 * A name that the old indexes allowed but the new rule makes equal to an older name of the same
 * table or database ("İ" beside "i̇", or "é" precomposed beside "e" and U+0301) keeps its name
 * and gets no key: renaming it here would go past records' and files' cached schemas and every
 * client that names it. Catalog's name checks fold such names themselves, so no third name
 * joins them; a rename gives the row its key.
 */
export class NameKeys extends Migration {
  override async up() {
    await this.keyNames("tables", "database_id", "tables_database_name_key");
    await this.keyNames("fields", "table_id", "fields_table_name_key");
  }

  private async keyNames(table: string, scope: string, index: string): Promise<void> {
    await this.execute(`alter table ${table} add column name_key text`);
    let after = { scope: "0", id: "0" };
    let current = "";
    const taken = new Set<string>();
    for (;;) {
      const rows = (await this.execute(
        `select id::text as id, ${scope}::text as scope, name from ${table}
          where (${scope}, id) > (?::bigint, ?::bigint) order by ${scope}, id limit ${PAGE}`,
        [after.scope, after.id],
      )) as { id: string; scope: string; name: string }[];
      if (rows.length === 0) break;
      const keys: { id: string; key: string }[] = [];
      for (const row of rows) {
        if (row.scope !== current) {
          current = row.scope;
          taken.clear();
        }
        const key = foldName(row.name);
        if (taken.has(key)) continue;
        taken.add(key);
        keys.push({ id: row.id, key });
      }
      await this.execute(
        `update ${table} t set name_key = k.key
           from jsonb_to_recordset(?::jsonb) as k(id bigint, key text) where t.id = k.id`,
        [JSON.stringify(keys)],
      );
      const last = rows[rows.length - 1]!;
      after = { scope: last.scope, id: last.id };
    }
    await this.execute(`drop index ${index}`);
    await this.execute(`create unique index ${index} on ${table} (${scope}, name_key)`);
  }
}
