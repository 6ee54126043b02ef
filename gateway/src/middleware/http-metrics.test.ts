import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Router } from "@koa/router";
import { createMetricsRegistry } from "@rowbase/kit";
import Koa from "koa";
import { describe, expect, it } from "vitest";
import type { GatewayState } from "../gateway-context.js";
import { ROUTER_OPTIONS } from "../routing/path-pattern.js";
import { httpMetrics, UNMATCHED_ROUTE } from "./http-metrics.js";

/** Runs one request through `httpMetrics` above a router, as the gateway stacks them. */
async function served(paths: string[]) {
  const registry = createMetricsRegistry();
  const router = new Router<GatewayState>(ROUTER_OPTIONS);
  router.get("/items/:id", (ctx) => {
    ctx.body = { id: ctx.params.id };
  });
  const app = new Koa<GatewayState>();
  app.use(httpMetrics(registry));
  app.use(router.routes());
  const handler = app.callback();
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  try {
    for (const path of paths) await (await fetch(`http://127.0.0.1:${port}${path}`)).text();
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
  const metric = (await registry.getMetricsAsJSON()).find(
    (m) => m.name === "rowbase_http_requests_total",
  );
  return metric?.values.map((v) => ({ ...v.labels, count: v.value })) ?? [];
}

describe("HTTP request metrics", () => {
  it("label a request by its route template, never by the ids in its path", async () => {
    expect(await served(["/items/1", "/items/2?verbose=1", "/items/3"])).toEqual([
      { method: "GET", route: "/items/:id", status: "200", count: 3 },
    ]);
  });

  it("put every path no route matched under one label", async () => {
    expect(await served(["/nope/1", "/nope/2"])).toEqual([
      { method: "GET", route: UNMATCHED_ROUTE, status: "404", count: 2 },
    ]);
  });
});
