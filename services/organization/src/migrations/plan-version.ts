import { Migration } from "@mikro-orm/migrations";

/**
 * `plan_version` goes up with every change of an organization's plan or limits: GetPlan answers
 * it, and the shared plan cache entry (kit plan-cache) is versioned by it, so that a lookup
 * that read the plan before a change can never cache it after the change.
 */
export class PlanVersion extends Migration {
  override up() {
    this.addSql("alter table organizations add column plan_version bigint not null default 0");
  }
}
