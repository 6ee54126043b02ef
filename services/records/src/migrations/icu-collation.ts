import { Migration } from "@mikro-orm/migrations";

/**
 * Records' like/nlike filters fold case by the ICU collation "und-x-icu" (query/where-compiler.ts),
 * so that they answer the same whatever the database's locale. A PostgreSQL built without ICU
 * has no such collation, and a database not encoded in UTF8 (SQL_ASCII is what `initdb` gives
 * under locale C unless told otherwise) cannot use it: either would fail every such filter.
 * This refuses the migrations instead, saying what is missing, before records runs on it.
 */
export class IcuCollation extends Migration {
  override up() {
    this.addSql(`
      do $check$
      begin
        perform upper('' collate "und-x-icu");
      exception when undefined_object then
        raise exception 'records needs the ICU collation "und-x-icu" (its like/nlike filters fold case by it), which this database cannot use: PostgreSQL must be built with ICU (every common build is) and the database encoded in UTF8 (this one is %)',
          getdatabaseencoding();
      end
      $check$;
    `);
  }
}
