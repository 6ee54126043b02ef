import { z } from "zod";

export interface ApiSchemaMeta {
  /** The component name in /openapi.json, stable for generated clients. */
  id: string;
  description?: string;
}

/**
 * Named schemas become `#/components/schemas/<id>` in /openapi.json and are referenced from
 * the operations. Request schemas are described as the client sends them (zod input), response
 * schemas as the gateway writes them (zod output), hence two registries.
 */
export const requestSchemas = z.registry<ApiSchemaMeta>();
export const responseSchemas = z.registry<ApiSchemaMeta>();

/** Names a request body schema for the OpenAPI document and returns it unchanged. */
export function requestBody<S extends z.ZodType>(id: string, schema: S, description?: string): S {
  requestSchemas.add(schema, description ? { id, description } : { id });
  return schema;
}

/**
 * Names the `data` of a success envelope (e.g. `AuthToken`); the document wraps it as
 * `<id>Response` = `{"message": "success", "data": <id>}`, the envelope names clients know.
 */
export function responseData<S extends z.ZodType>(id: string, schema: S, description?: string): S {
  responseSchemas.add(schema, description ? { id, description } : { id });
  return schema;
}

export function schemaIdOf(schema: z.ZodType): string | undefined {
  return (requestSchemas.get(schema) ?? responseSchemas.get(schema))?.id;
}
