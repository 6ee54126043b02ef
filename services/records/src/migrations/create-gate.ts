import { Migration } from "@mikro-orm/migrations";

/**
 * `create_gate`, what a create does before it inserts, in the create's own statement: takes the
 * organization's and the table's shared advisory locks (a deletion takes them exclusively), looks
 * for the deletion marks, and counts the records against the plan's limit in
 * `organization_usage`. A VOLATILE function's queries each read a fresh snapshot, so the marks
 * looked for after a wait on a deletion's lock include the one it committed. Answers `ok` (the
 * count is taken), `gone` (the table or its organization is deleted) or `over_limit`. A create
 * without autonumbers calls it in the statement that inserts; one with autonumbers, in a
 * transaction, as its last statement (record-store's `createRecords`, `passCreateGate`).
 */
export class CreateGate extends Migration {
  override up() {
    this.addSql(`
      create function create_gate(
        p_table_id bigint, p_organization_id bigint, p_count bigint, p_limit bigint
      ) returns text language plpgsql volatile
      set search_path from current
      as $gate$
      begin
        perform pg_advisory_xact_lock_shared(
                  hashtextextended('records.organization:' || p_organization_id, 0)),
                pg_advisory_xact_lock_shared(hashtextextended('records.table:' || p_table_id, 0));
        if exists (select 1 from deleted_table where table_id = p_table_id)
           or exists (select 1 from deleted_organization where organization_id = p_organization_id)
        then
          return 'gone';
        end if;
        if p_count > p_limit then
          return 'over_limit';
        end if;
        insert into organization_usage as u (organization_id, records)
        values (p_organization_id, p_count)
        on conflict (organization_id) do update set records = u.records + excluded.records
          where u.records + excluded.records <= p_limit;
        return case when found then 'ok' else 'over_limit' end;
      end
      $gate$;
    `);
  }
}
