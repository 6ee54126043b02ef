import { Migration } from "@mikro-orm/migrations";

/**
 * `schema_version` goes up with every change of a table or its fields: GetTableSchema answers
 * it, and the schema cache entry records and files share (kit table-schema-cache) is versioned
 * by it, so that a lookup that read the schema before a change can never cache it after it.
 */
export class SchemaVersion extends Migration {
  override up() {
    this.addSql("alter table tables add column schema_version bigint not null default 0");
  }
}
