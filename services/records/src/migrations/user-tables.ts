import { Migration } from "@mikro-orm/migrations";

/**
 * `user_table`: the tables whose records live in a PostgreSQL table of their own,
 * `org_<organization_id>.t_<table_id>` with a column per field (docs/records-storage.md), rather
 * than in `record`. A table gets its row in the transaction that creates its user table, and
 * keeps it until the user table is dropped: a table with no row here is still stored in
 * `record`, until the upgrade moves it.
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
    `);
  }
}
