import { Migration } from "@mikro-orm/migrations";

/**
 * `organization_usage_share`: what creates and deletes now add to an organization's record
 * count, a row no other transaction holds (sql/record_usage_add.sql), so that parallel creates
 * do not all queue on the organization's one `organization_usage` row, held to each one's
 * commit (sql/take_records.sql says how the quota stays exact). The count is that row's
 * `records` plus the organization's shares (sql/record_usage.sql); a share may be negative.
 * The row stays as it was for the previous version's replicas while both versions run: their
 * creates already count through the new functions (a migration replaces them); their deletes
 * still take from the row, never below 0, so a delete they make of records counted in shares
 * leaves the count that much high (never low: the limit is never passed).
 */
export class UsageShares extends Migration {
  override up() {
    this.addSql(`
      create table organization_usage_share (
        id bigint generated always as identity primary key,
        organization_id bigint not null,
        records bigint not null
      );
      create index organization_usage_share_organization
        on organization_usage_share (organization_id);
    `);
  }
}
