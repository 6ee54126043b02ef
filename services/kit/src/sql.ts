import type { EntityManager, Kysely } from "@mikro-orm/postgresql";

type CompiledQuery = Extract<Parameters<Kysely<unknown>["executeQuery"]>[0], { sql: string }>;

/**
 * Runs one statement with `$1, $2, ...` placeholders as a real parameterised query (values travel
 * apart from the SQL text), inside the EntityManager's transaction when it has one.
 *
 * `em.execute` is not used for these: MikroORM 7 inlines its `?` parameters into the SQL text
 * (quoted client-side), while the query language compiles to PostgreSQL placeholders with casts
 * (`$3::numeric`, `$4::jsonb[]`) whose values must never become SQL text.
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
