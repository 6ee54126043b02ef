import { Migration } from "@mikro-orm/migrations";

/**
 * `create_gate` has one form, the seven-argument one of sql/create_gate.sql. The four- and
 * five-argument forms were kept only for replicas of older versions during their rollouts; no
 * code calls them, and a fresh database never has them.
 */
export class DropCreateGateOverloads extends Migration {
  override up() {
    this.addSql(`
      drop function if exists create_gate(bigint, bigint, bigint, bigint);
      drop function if exists create_gate(bigint, bigint, bigint, bigint, bigint[]);
    `);
  }
}
