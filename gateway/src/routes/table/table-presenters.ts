import type { Table } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import type { z } from "zod";
import { idOf, required, timeOf } from "../../presentation/wire-values.js";
import type { TableSchema } from "./table-schemas.js";

/** `table` is the response field that carries it; missing, it is a service bug (500). */
export function presentTable(table: Table | undefined): z.output<typeof TableSchema> {
  const t = required(table, "table");
  return {
    table_id: idOf(t.tableId),
    database_id: idOf(t.databaseId),
    name: t.name,
    description: t.description,
    created_at: timeOf(t.createdAt),
    updated_at: timeOf(t.updatedAt),
  };
}
