import { Migration } from "@mikro-orm/migrations";

/**
 * `audit_event.via`: how a change came in when not through the REST API ("mcp" for the MCP
 * endpoint's tools), null otherwise. A column without a default: adding it rewrites nothing.
 */
export class AuditVia extends Migration {
  override up() {
    this.addSql("alter table audit_event add column via text");
  }
}
