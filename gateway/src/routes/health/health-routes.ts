import { Code, createServiceClient, domainError, REQUEST_ID_HEADER } from "@rowbase/kit";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@rowbase/proto/grpc/health/v1/health_pb";
import { defineRoute, type Route } from "../../routing/route.js";

/** A service /health/ready checks, by its gRPC base URL. */
export interface HealthTarget {
  name: string;
  url: string;
}

/** A readiness probe must answer well within a Kubernetes probe's timeout. */
const CHECK_TIMEOUT_MS = 2_000;

const tags = ["Health"];

const QUERY_NOTE =
  "Query parameters are ignored (monitors and load balancers add cache-busters), except " +
  "that a credential among them is refused with 400 as on every path.";

/** Liveness of the gateway itself, readiness of what it depends on, for probes and monitors. */
export function healthRoutes(targets: readonly HealthTarget[]): Route[] {
  const checks = targets.map((target) => ({
    name: target.name,
    client: createServiceClient(Health, target.url),
  }));
  return [
    defineRoute({
      method: "GET",
      path: "/health",
      operationId: "health",
      summary: "The gateway is running",
      description: QUERY_NOTE,
      tags,
      auth: "none",
      ignoresQuery: true,
      async handle() {
        return {};
      },
    }),
    defineRoute({
      method: "GET",
      path: "/health/ready",
      operationId: "healthReady",
      summary: "Every service the gateway depends on answers its gRPC health check",
      description:
        "503 `service_unavailable` with `data.failing` naming the services that did not answer " +
        `SERVING. ${QUERY_NOTE}`,
      tags,
      auth: "none",
      ignoresQuery: true,
      async handle({ ctx }) {
        const results = await Promise.all(
          checks.map(async ({ name, client }) => {
            try {
              const { status } = await client.check(
                { service: "" },
                {
                  timeoutMs: CHECK_TIMEOUT_MS,
                  headers: { [REQUEST_ID_HEADER]: ctx.state.requestId },
                },
              );
              return status === ServingStatus.SERVING ? undefined : name;
            } catch (error) {
              // Why a service is not ready, for whoever reads the probe's 503.
              ctx.state.log.warn({ err: error, service: name }, "health check failed");
              return name;
            }
          }),
        );
        const failing = results.filter((name) => name !== undefined);
        if (failing.length > 0) {
          throw domainError(Code.Unavailable, "service_unavailable", {
            failing: JSON.stringify(failing),
          });
        }
        return {};
      },
    }),
  ];
}
