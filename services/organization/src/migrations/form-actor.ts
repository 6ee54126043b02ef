import { Migration } from "@mikro-orm/migrations";

/**
 * Audit events may name a public form as their actor (`form`, id = the form's id): the records
 * a form submits are audited as its doing, not a user's or a token's.
 */
export class FormActor extends Migration {
  override up() {
    this.addSql(`
      alter table audit_event drop constraint audit_event_actor_type_check;
      alter table audit_event add constraint audit_event_actor_type_check
        check (actor_type in ('user', 'api_token', 'system', 'form'));
    `);
  }
}
