import { Migration } from "@mikro-orm/migrations";
import { lz4CompressionSql } from "@rowbase/kit";

/**
 * `group_changes`: an audit group's changes (the JSON array of its events' changes arrays) as
 * `json`, the text the producer wrote, checked but not rebuilt. Stored as `jsonb`, a batch's
 * thousands of small change objects were built into a binary document on every store, which
 * cost PostgreSQL about twenty times the CPU of checking them (test/bench/README.md, "The
 * change log and the audit groups as json"); no read needs the binary form, since a list
 * takes its page's events from a group by position. Groups stored before this keep their
 * changes in `changes` (the list reads either); a new group leaves `changes` at its default.
 * Adding the column rewrites nothing; lz4 as `changes`.
 */
export class AuditGroupChangesJson extends Migration {
  override up() {
    this.addSql("alter table audit_event add column group_changes json");
    this.addSql(lz4CompressionSql(["audit_event.group_changes"]));
  }
}
