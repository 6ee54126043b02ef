import type { Database } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import type { z } from "zod";
import { idOf, required, timeOf } from "../../presentation/wire-values.js";
import type { DatabaseSchema } from "./database-schemas.js";

/** `database` is the response field that carries it; missing, it is a service bug (500). */
export function presentDatabase(database: Database | undefined): z.output<typeof DatabaseSchema> {
  const d = required(database, "database");
  return {
    database_id: idOf(d.databaseId),
    organization_id: idOf(d.organizationId),
    name: d.name,
    description: d.description,
    created_at: timeOf(d.createdAt),
    updated_at: timeOf(d.updatedAt),
  };
}
