import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { type MetricsRegistry, rpcServerMetrics } from "./metrics.js";
import { ensureTracing, inServerSpan, type Span, SpanStatusCode } from "./tracing.js";

/** Codes that mean the server failed, not the caller (OpenTelemetry's rule for gRPC servers). */
const SERVER_FAULTS = new Set([
  Code.Unknown,
  Code.DeadlineExceeded,
  Code.Unimplemented,
  Code.Internal,
  Code.Unavailable,
  Code.DataLoss,
]);

/**
 * The outermost interceptor of kit's gRPC server: runs each call in a server span continuing
 * the caller's `traceparent` (so every log line of the call, the call-context line included,
 * carries the caller's `trace_id`), and counts and times it by procedure and gRPC status code.
 */
export function rpcObservabilityInterceptor(metrics: MetricsRegistry): Interceptor {
  ensureTracing();
  const { handled, duration } = rpcServerMetrics(metrics);
  return (next) => (req) => {
    const started = performance.now();
    const procedure = `${req.service.typeName}/${req.method.name}`;
    const options = {
      name: procedure,
      header: (name: string) => req.header.get(name) ?? undefined,
      attributes: {
        "rpc.system": "grpc",
        "rpc.service": req.service.typeName,
        "rpc.method": req.method.name,
      },
    };
    return inServerSpan(options, async (span) => {
      let code: Code | undefined;
      try {
        return await next(req);
      } catch (error) {
        code = error instanceof ConnectError ? error.code : Code.Internal;
        recordFault(span, code, error);
        throw error;
      } finally {
        const labels = { procedure, code: code === undefined ? "OK" : Code[code] };
        handled.inc(labels);
        duration.observe(labels, (performance.now() - started) / 1000);
        span.setAttribute("rpc.grpc.status_code", code ?? 0);
      }
    });
  };
}

function recordFault(span: Span, code: Code, error: unknown) {
  if (!SERVER_FAULTS.has(code)) return;
  span.setStatus({ code: SpanStatusCode.ERROR, message: Code[code] });
  // The cause kit's call-context interceptor masked is what explains the fault.
  const cause = error instanceof ConnectError && error.cause instanceof Error ? error.cause : error;
  if (cause instanceof Error) span.recordException(cause);
}
