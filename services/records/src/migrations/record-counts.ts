import { Migration } from "@mikro-orm/migrations";

/**
 * `record_count`: how many records each table holds, kept by the triggers of
 * sql/record_count_change.sql (the rule and its slots are there). This counts what is there
 * under the table's lock, which keeps writes out until the commit: the triggers are made in the
 * same transaction, after the migrations, so every write after the count is counted by them.
 */
export class RecordCounts extends Migration {
  override up() {
    this.addSql(`
      create table record_count (
        id bigint generated always as identity primary key,
        table_id bigint not null,
        slot integer not null,
        delta bigint not null
      );
      create index record_count_slot on record_count (table_id, slot);

      lock table record in share row exclusive mode;
      insert into record_count (table_id, slot, delta)
      select table_id, 0, count(*) from record group by table_id;
    `);
  }
}
