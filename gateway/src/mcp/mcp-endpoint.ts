import type { Router } from "@koa/router";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { ApiTokenAuthenticator } from "../auth/api-token-authenticator.js";
import { API_TOKEN_PREFIX, bearerOf, unauthorized } from "../auth/authenticate.js";
import { downstreamCallOptions } from "../auth/downstream-call.js";
import { ValidationFailed } from "../errors/validation-failed.js";
import type { GatewayContext, GatewayState } from "../gateway-context.js";
import { type JsonBodyBudget, parseJsonBody, receiveJsonBody } from "../http/json-body.js";
import { reportRateLimits } from "../rate-limit/rate-limit-headers.js";
import type { RateLimits } from "../rate-limit/rate-limits.js";
import { type McpToolDeps, mcpServer } from "./mcp-tools.js";

export const MCP_PATH = "/mcp";

export interface McpEndpointDeps extends McpToolDeps {
  apiTokens: ApiTokenAuthenticator;
  rateLimits: RateLimits;
  jsonBodies: JsonBodyBudget;
  internalSecret: string;
  /** PUBLIC_BASE_URL: its host and origin are the ones the endpoint answers (DNS rebinding). */
  publicBaseUrl: string;
  /** MCP_ALLOWED_HOSTS: other `Host` values it answers (in-cluster names). */
  extraHosts: readonly string[];
  /** CORS_ALLOWED_ORIGINS: the other origins whose pages may call it, as they may the API. */
  extraOrigins: readonly string[];
}

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];

/**
 * The `Host` values the endpoint answers, against DNS rebinding: a page on another site whose
 * name is made to point at this server sends its own name as Host. That of PUBLIC_BASE_URL; a
 * loopback base also under the other loopback names, as a local client may spell it; and
 * those the operator lists (MCP_ALLOWED_HOSTS).
 */
export function allowedHosts(publicBaseUrl: string, extraHosts: readonly string[] = []): string[] {
  const url = new URL(publicBaseUrl);
  const own = LOOPBACK_NAMES.includes(url.hostname)
    ? LOOPBACK_NAMES.map((name) => (url.port ? `${name}:${url.port}` : name))
    : [url.host];
  return [...new Set([...own, ...extraHosts])];
}

/**
 * The `Origin` a browser may send: PUBLIC_BASE_URL's (and loopback spellings of it), and the
 * origins the operator lets call the API from a browser (CORS_ALLOWED_ORIGINS), whose
 * preflights to /mcp the CORS middleware answers as to any route.
 */
function allowedOrigins(publicBaseUrl: string, extraOrigins: readonly string[]): string[] {
  const { protocol } = new URL(publicBaseUrl);
  const own = allowedHosts(publicBaseUrl).map((host) => `${protocol}//${host}`);
  return [...new Set([...own, ...extraOrigins])];
}

/** The JSON-RPC messages of a body that call a tool: each is one API call under the limits. */
function toolCalls(message: unknown): number {
  const messages = Array.isArray(message) ? message : [message];
  return messages.filter(
    (item) =>
      typeof item === "object" &&
      item !== null &&
      (item as { method?: unknown }).method === "tools/call",
  ).length;
}

/**
 * `POST /mcp`: the Model Context Protocol over Streamable HTTP, stateless (no session; each
 * request gets its own server and transport, as the SDK requires) and answered as JSON. Only
 * an API token is taken (401 otherwise, as the REST routes answer). Each `tools/call` takes one
 * from the token's record-route rate limit before anything runs (429 with Retry-After, as a
 * record route); `initialize` and `tools/list` are free. GET and DELETE, which a stateful
 * server would use for its streams and sessions, answer 405.
 */
export function mountMcpEndpoint(router: Router<GatewayState>, deps: McpEndpointDeps): void {
  const hosts = allowedHosts(deps.publicBaseUrl, deps.extraHosts);
  const origins = allowedOrigins(deps.publicBaseUrl, deps.extraOrigins);
  router.post(MCP_PATH, async (ctx) => {
    const authorization = ctx.get("authorization") || undefined;
    const credential = bearerOf(authorization);
    if (credential === undefined) throw unauthorized(authorization ? "malformed" : "missing");
    if (!credential.startsWith(API_TOKEN_PREFIX)) throw unauthorized("session_refused");
    const caller = await deps.apiTokens.authenticate(credential, ctx.state.requestId);
    const received = await receiveJsonBody(ctx);
    await deps.jsonBodies.run(received, async () => {
      let message: unknown;
      try {
        message = parseJsonBody(received);
      } catch (error) {
        if (error instanceof ValidationFailed) return refuseBody(ctx, error);
        throw error;
      }
      const report = reportRateLimits(ctx);
      for (let i = toolCalls(message); i > 0; i--) {
        await deps.rateLimits.consume("records_token", caller.tokenId.toString(), report);
      }
      // The services see the token acting through MCP: its writes are audited with `via`.
      const viaMcp = { ...caller, via: "mcp" } as const;
      const call = await downstreamCallOptions(deps.internalSecret, ctx.state.requestId, viaMcp);
      const server = mcpServer(deps, { caller, call, ctx });
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
        enableDnsRebindingProtection: true,
        allowedHosts: hosts,
        allowedOrigins: origins,
      });
      try {
        await server.connect(transport);
        const response = await transport.handleRequest(webRequest(ctx), { parsedBody: message });
        await answerWith(ctx, response);
      } finally {
        await server.close();
      }
    });
  });
}

/**
 * A body /mcp does not take, answered as the SDK answers one (HTTP 400 and a JSON-RPC error with
 * a null id) rather than with the REST routes' envelope, which an MCP client does not read:
 * malformed JSON is a parse error (-32700); valid JSON no route takes (a `__proto__` key) or a
 * body that is not UTF-8, an invalid request (-32600).
 */
function refuseBody(ctx: GatewayContext, refusal: ValidationFailed): void {
  const [item] = refusal.items;
  const parse = item?.code === "invalid_syntax";
  const message = `${parse ? "Parse error" : "Invalid Request"}: the body ${item?.message}`;
  ctx.status = 400;
  ctx.type = "application/json";
  ctx.body = JSON.stringify({
    jsonrpc: "2.0",
    error: { code: parse ? -32700 : -32600, message },
    id: null,
  });
}

/** The request as the SDK's web-standard transport reads it (its body is passed parsed). */
function webRequest(ctx: GatewayContext): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(ctx.req.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return new Request(new URL(ctx.originalUrl, "http://gateway.invalid"), {
    method: ctx.method,
    headers,
  });
}

/**
 * Answers the transport's response through Koa, so the gateway's middleware sees its status.
 * In JSON mode the transport has the whole answer before it returns.
 */
async function answerWith(ctx: GatewayContext, response: Response): Promise<void> {
  const text = await response.text();
  response.headers.forEach((value, name) => {
    if (name !== "content-length") ctx.set(name, value);
  });
  ctx.body = text === "" ? null : text;
  ctx.status = response.status;
}
