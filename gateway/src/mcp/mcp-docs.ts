import { MCP_PATH } from "./mcp-endpoint.js";
import { MCP_BATCH_MAX, toolSummaries } from "./mcp-tools.js";

const schemaRef = (id: string) => ({ $ref: `#/components/schemas/${id}` });

const domainError = (codes: string[]) => ({
  type: "object",
  required: ["message", "data"],
  properties: { message: { enum: codes }, data: { type: "object" } },
});

const jsonRpc = {
  type: "object",
  description: "A JSON-RPC 2.0 message of the Model Context Protocol",
  required: ["jsonrpc"],
  properties: { jsonrpc: { const: "2.0" }, id: {}, method: { type: "string" } },
};

/**
 * `/mcp` in /openapi.json. The endpoint speaks JSON-RPC rather than REST, so the document says
 * what it takes and answers at the HTTP level and lists the tools; the tools' own schemas are
 * what `tools/list` answers.
 */
export function mcpPathItems(): Record<string, Record<string, unknown>> {
  const tools = toolSummaries()
    .map((tool) => `- \`${tool.name}\` (${tool.write ? "read_write" : "read"}): ${tool.title}`)
    .join("\n");
  return {
    [MCP_PATH]: {
      post: {
        operationId: "mcp",
        summary: "Model Context Protocol endpoint for AI agents (Streamable HTTP, stateless)",
        description:
          "Connect an MCP client (Claude Desktop, Claude Code, any client of the Streamable " +
          "HTTP transport) with this URL and `Authorization: Bearer <API token>`. No session: " +
          "each POST carries one JSON-RPC message, answered as JSON. The token's organization " +
          "and access bound every tool; a `read` token is not offered the write tools and cannot " +
          "call them. Each `tools/call` counts as one API call under the token's rate limit and " +
          "the plan's `api_calls_per_month`; `initialize` and `tools/list` do not. A bad " +
          "argument answers a tool result with `isError: true` and the REST route's 400 " +
          `message. Write tools take 1-${MCP_BATCH_MAX} records, all or none, and are ` +
          'audited with `via: "mcp"`. `Host` must be the public base URL\'s host and a ' +
          "browser's `Origin` its origin or one CORS allows (DNS rebinding). GET and DELETE " +
          "answer 405.\n\n" +
          `Tools:\n${tools}`,
        tags: ["MCP"],
        security: [{ apiToken: [] }],
        requestBody: {
          required: true,
          content: { "application/json": { schema: jsonRpc } },
        },
        responses: {
          200: {
            description: "The JSON-RPC answer",
            content: { "application/json": { schema: jsonRpc } },
          },
          202: { description: "A notification or response was accepted (no body)" },
          400: {
            description:
              "Not JSON (-32700), a `__proto__` key (-32600), or not a JSON-RPC message: a JSON-RPC error",
            content: { "application/json": { schema: jsonRpc } },
          },
          401: {
            description: "No valid API token: `unauthorized`",
            content: { "application/json": { schema: domainError(["unauthorized"]) } },
          },
          403: {
            description:
              "`Host` not this deployment's, or an `Origin` neither its own nor one CORS allows (DNS rebinding): a JSON-RPC error",
            content: { "application/json": { schema: jsonRpc } },
          },
          406: {
            description:
              "`Accept` must name application/json and text/event-stream: a JSON-RPC error",
            content: { "application/json": { schema: jsonRpc } },
          },
          413: {
            description: "Body over 1 MiB: `payload_too_large`",
            content: { "application/json": { schema: domainError(["payload_too_large"]) } },
          },
          429: {
            description: "The token's rate limit: `too_many_requests`",
            headers: {
              "Retry-After": { description: "Seconds to wait", schema: { type: "integer" } },
            },
            content: { "application/json": { schema: domainError(["too_many_requests"]) } },
          },
          500: {
            description: "Unexpected failure",
            content: { "application/json": { schema: schemaRef("InternalError") } },
          },
        },
      },
    },
  };
}
