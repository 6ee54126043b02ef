import { Migration } from "@mikro-orm/migrations";

/**
 * `user_table`: the tables whose records live in a PostgreSQL table of their own,
 * `org_<organization_id>.t_<table_id>` with a column per field (docs/records-storage.md), rather
 * than in `record`. A table gets its row in the transaction that creates its user table, and
 * keeps it until the user table is dropped: a table with no row here is still stored in
 * `record`, until the upgrade moves it.
 *
 * `row_range`: the row ids each user table holds, as ranges of consecutive ids (its insert
 * trigger writes them, sql/user_table_rows_change.sql), so that a row id alone finds its table:
 * the file routes name a record by its row id. GiST serves "which range holds this id".
 *
 * `kept_column`: the type changes records has made before catalog committed them, by catalog's
 * change id, whose field's values as they were are kept in `f_<field_id>_prev`: catalog's
 * event of the change drops that column, a release of the change (catalog did not commit it)
 * puts it back in the field's place.
 */
export class UserTables extends Migration {
  override up() {
    this.addSql(`
      create table user_table (
        table_id bigint primary key,
        organization_id bigint not null,
        created_at timestamptz not null default now()
      );
      create index user_table_organization on user_table (organization_id);

      create table row_range (
        table_id bigint not null,
        ids int8range not null
      );
      create index row_range_ids on row_range using gist (ids);
      create index row_range_table on row_range (table_id);

      create table kept_column (
        change_id text primary key,
        organization_id bigint not null,
        table_id bigint not null,
        field_id bigint not null,
        created_at timestamptz not null default now()
      );
      create index kept_column_field on kept_column (table_id, field_id);
    `);
  }
}
