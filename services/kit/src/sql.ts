import type { EntityManager, Kysely } from "@mikro-orm/postgresql";

type CompiledQuery = Extract<Parameters<Kysely<unknown>["executeQuery"]>[0], { sql: string }>;

/**
 * Runs one statement with `$1, $2, ...` placeholders as a real parameterised query (values travel
 * apart from the SQL text), inside the EntityManager's transaction when it has one.
 *
 * Use it instead of `em.execute`, which in MikroORM 7 quotes its `?` parameters into the SQL
 * text client-side: values from a client (records' query language compiles to placeholders with
 * casts such as `$3::numeric`) must never become SQL text, and quoting a large value (the
 * outbox's payloads, the audit log's rows as one JSON parameter) costs more than the statement.
 *
 * Values as node-postgres sends them: bigint and number as their text, arrays as PostgreSQL
 * arrays, strings as they are; pass JSON as a string (`JSON.stringify`) with a `::jsonb` cast.
 */
export async function query<R extends object = Record<string, unknown>>(
  em: EntityManager,
  sql: string,
  params: readonly unknown[] = [],
): Promise<R[]> {
  const compiled: CompiledQuery = {
    sql,
    parameters: params,
    // What kysely's CompiledQuery.raw builds; only plugins would read it.
    query: { kind: "RawNode", sqlFragments: [sql], parameters: [] } as CompiledQuery["query"],
    queryId: { queryId: crypto.randomUUID() },
  };
  const result = await em.getKysely().executeQuery(compiled);
  return result.rows as R[];
}
