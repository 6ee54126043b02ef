import { Migration } from "@mikro-orm/migrations";

/**
 * `pending_type_change_write.as_changed`: whether the write that noted the record last (under
 * that mark) held the field as the change makes it, its schema already the new one (catalog
 * committed the change, and records has not applied its event yet). A choice rename applied
 * after such a write would rename what it wrote again: for a swap of two names (A and B), a
 * value "A" written with the new choices means the choice that was B, and renaming it to "B"
 * stored the other choice. The rename's last transaction leaves those records alone and renames
 * the others (`renameChoicesOf`). Notes written before the column are taken as written with the
 * old schema, as all of them were renamed before.
 */
export class PendingWritesAsChanged extends Migration {
  override up() {
    this.addSql(`
      alter table pending_type_change_write add column as_changed boolean not null default false;
    `);
  }
}
