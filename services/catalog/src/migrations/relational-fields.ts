import { Migration } from "@mikro-orm/migrations";

/**
 * Link, lookup and rollup fields. The type check takes the three new types, and lookups and
 * rollups join the read-only types that cannot be required. The partial indexes find, within a
 * database, what a deletion takes with it: the lookups and rollups that go through a link or
 * show a field (`link_field_id`, `field_id`), and the links that point to a table
 * (`table_id`). Their expressions are the ones `db/relations.ts` queries by.
 */
export class RelationalFields extends Migration {
  override up() {
    this.addSql(`
      alter table fields drop constraint fields_type_check;
      alter table fields add constraint fields_type_check check (type in (
        'text', 'long_text', 'number', 'boolean', 'date', 'datetime', 'single_select',
        'multi_select', 'email', 'url', 'phone', 'json', 'file', 'autonumber', 'created_at',
        'updated_at', 'link', 'lookup', 'rollup'
      ));
      alter table fields drop constraint fields_read_only_not_required;
      alter table fields add constraint fields_read_only_not_required check (
        not (required and type in (
          'file', 'autonumber', 'created_at', 'updated_at', 'lookup', 'rollup'
        ))
      );
      create index fields_by_link_field on fields (((options->>'link_field_id')::bigint))
        where type in ('lookup', 'rollup');
      create index fields_by_shown_field on fields (((options->>'field_id')::bigint))
        where type in ('lookup', 'rollup');
      create index fields_by_link_target on fields (((options->>'table_id')::bigint))
        where type = 'link';
    `);
  }
}
