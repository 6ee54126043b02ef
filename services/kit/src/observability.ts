import type { Logger } from "./logger.js";
import { type MetricsRegistry, processMetricsRegistry, startMetricsServer } from "./metrics.js";
import { startTracing } from "./tracing.js";

export interface ObservabilityOptions {
  /** `service.name` of the process's spans: `gateway`, `identity`, ... or `rowbase` (launcher). */
  serviceName: string;
  /** The process's parsed `observabilityEnv` settings. */
  config: { METRICS_PORT: number; OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined };
  logger: Logger;
  /** The registry `/metrics` serves; the process's registry when absent. */
  metrics?: MetricsRegistry;
  /** Interface of the metrics port; every interface when absent (as Kubernetes needs). */
  host?: string;
}

export interface Observability {
  /** Where `/metrics` answers (the configured port, or the free one picked for 0). */
  metricsPort: number;
  /** Stops serving `/metrics` and flushes buffered spans; call it last on shutdown. */
  close(): Promise<void>;
}

/**
 * What a process entry point starts first: tracing (exported only with an OTLP endpoint) and
 * the `/metrics` port. Servers, relays and pools built afterwards record into the same registry
 * and trace context without being told.
 */
export async function startObservability(options: ObservabilityOptions): Promise<Observability> {
  const endpoint = options.config.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracing = await startTracing({ serviceName: options.serviceName, otlpEndpoint: endpoint });
  try {
    const server = await startMetricsServer({
      registry: options.metrics ?? processMetricsRegistry(),
      port: options.config.METRICS_PORT,
      ...(options.host ? { host: options.host } : {}),
    });
    options.logger.info(
      { metrics_port: server.port, traces: endpoint ? "otlp" : "off" },
      "observability started",
    );
    return {
      metricsPort: server.port,
      async close() {
        await server.close();
        await tracing.shutdown();
      },
    };
  } catch (error) {
    await tracing.shutdown();
    throw error;
  }
}
