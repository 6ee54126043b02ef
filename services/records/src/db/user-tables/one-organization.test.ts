import type { JsonObject } from "@bufbuild/protobuf";
import type { SchemaField } from "@rowbase/kit";
import type { FieldTypeName } from "@rowbase/kit/field-types";
import { describe, expect, it } from "vitest";
import { listQuery } from "../../records.js";
import { pageStatement } from "../reads.js";
import {
  addFieldSql,
  createLinkJunctionSql,
  createTableSql,
  dropFieldSql,
  dropLinkJunctionSql,
  dropOrganizationSchemaSql,
  dropTableSql,
} from "./ddl.js";
import { userTableRows } from "./table-rows.js";
import { keepChoicesSql, numberRowsSql } from "./value-changes.js";

// A schema per organization is what spreads organizations over a cluster's nodes (Citus's
// schema-based sharding), so no statement of the per-table storage may name another
// organization's schema than the one it works for.

const ORGANIZATION = 41n;
const TABLE = 410n;
const TYPES: FieldTypeName[] = ["text", "number", "single_select", "multi_select", "datetime"];
const FIELDS: SchemaField[] = TYPES.map((type, i) => ({
  id: String(4100 + i),
  name: `F${i}`,
  type,
  options: (type.endsWith("select") ? { choices: [{ id: "ch_a1", name: "A" }] } : {}) as JsonObject,
  required: false,
  description: "",
}));
// A link to a second table of the organization, and that table's fields (for the display).
FIELDS.push({
  id: "4190",
  name: "Link",
  type: "link",
  options: { table_id: 411, multiple: true, inverse_field_id: 4191 },
  required: false,
  description: "",
});
const LINKED = new Map([["411", [FIELDS[0]!]]]);
const STORED = FIELDS.map((f) => ({ ...f, id: BigInt(f.id) }));

function schemasNamed(sql: string): string[] {
  return [...new Set([...sql.matchAll(/\borg_[0-9]+\b/g)].map((match) => match[0]))];
}

describe("the per-table storage's statements", () => {
  it("name the schema of the organization they work for and no other", () => {
    const page = listQuery(
      { tableId: TABLE, databaseId: 1n, organizationId: ORGANIZATION, name: "T", fields: FIELDS },
      { limit: 10, offset: 0, where: "(F0,eq,x)~or(F2,eq,A)", sort: "-F1,F4", count: "estimated" },
      "columns",
      new Set(),
      LINKED,
    );
    const statements = [
      ...createTableSql(ORGANIZATION, TABLE, STORED),
      ...addFieldSql(ORGANIZATION, TABLE, STORED[1]!),
      ...dropFieldSql(ORGANIZATION, TABLE, STORED[1]!.id),
      ...dropTableSql(ORGANIZATION, TABLE),
      ...dropOrganizationSchemaSql(ORGANIZATION),
      keepChoicesSql(ORGANIZATION, TABLE, STORED[3]!.id, true),
      numberRowsSql(ORGANIZATION, TABLE, STORED[0]!.id),
      userTableRows(ORGANIZATION, TABLE, FIELDS, LINKED).values,
      ...createLinkJunctionSql(ORGANIZATION, {
        id: 4190n,
        tableId: TABLE,
        inverseFieldId: 4191n,
        linkedTableId: 411n,
      }),
      ...dropLinkJunctionSql(ORGANIZATION, 4190n, 4191n),
      userTableRows(ORGANIZATION, TABLE, FIELDS).insert({
        tableId: "$1",
        organizationId: "$2",
        actor: "$3",
        ids: "$4",
        data: "$5",
        condition: "true",
      }),
      pageStatement(page).sql,
    ];
    for (const sql of statements) {
      const others = schemasNamed(sql).filter((schema) => schema !== `org_${ORGANIZATION}`);
      expect({ sql, others }).toEqual({ sql, others: [] });
    }
    // Those that reach a relation reach it through the organization's schema, but for those
    // that keep records' own global tables (counts, the registry of user tables) in step.
    const relations = statements.filter(
      (sql) =>
        !sql.startsWith("r.row_id") &&
        !/^delete from (record_count|row_range|user_table) /.test(sql),
    );
    for (const sql of relations) expect(schemasNamed(sql)).toEqual([`org_${ORGANIZATION}`]);
  });
});
