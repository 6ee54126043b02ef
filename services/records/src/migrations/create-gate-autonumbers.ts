import { Migration } from "@mikro-orm/migrations";

/**
 * `autonumber_counter.deleted`: a deleted field's counter is kept, marked deleted, so that a
 * create whose schema still has the field cannot start it again (`takeAutonumbers` refuses it,
 * and the create reads the schema again) and leave every later create `stale`
 * (sql/create_checks.sql).
 */
export class CreateGateAutonumbers extends Migration {
  override up() {
    this.addSql(`
      alter table autonumber_counter add column deleted boolean not null default false;
    `);
  }
}
