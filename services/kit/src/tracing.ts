import {
  type Attributes,
  context,
  isSpanContextValid,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { suppressTracing, W3CTraceContextPropagator } from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { ATTR_DB_QUERY_TEXT, ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import pg from "pg";

export { type Span, SpanStatusCode } from "@opentelemetry/api";

/** The W3C Trace Context header every hop reads and writes. */
export const TRACEPARENT_HEADER = "traceparent";

export interface TracingOptions {
  /** `service.name` of this process's spans (`gateway`, `identity`, ... or `rowbase`). */
  serviceName: string;
  /**
   * OTEL_EXPORTER_OTLP_ENDPOINT, the collector's OTLP/HTTP base URL (`http://collector:4318`).
   * Unset: no span is recorded or exported; trace ids are still made and carried for the logs.
   */
  otlpEndpoint?: string | undefined;
}

export interface Tracing {
  /** Whether spans are recorded (an exporter is configured) or only trace ids are carried. */
  readonly recording: boolean;
  /** Exports what is buffered and unregisters, so that tracing can be started again. */
  shutdown(): Promise<void>;
}

interface Installed extends Tracing {
  /** Installed by `ensureTracing` because nobody started tracing: replaced by `startTracing`. */
  implicit: boolean;
  /** Releases the global registrations and patches at once (flushing is left to `shutdown`). */
  uninstall(): void;
}

/** Patches a library to make spans with the provider; returns how to undo it. */
type Instrument = (provider: TracerProvider) => () => void;

let installed: Installed | undefined;

/**
 * Starts tracing for this process, once, before it serves. Always: an AsyncLocalStorage context
 * and the W3C `traceparent` propagator, so every request has a trace id that reaches the logs
 * (`trace_id`) and the next hop. With an OTLP endpoint spans are also recorded (the caller's
 * sampling decision is followed; see `serverRootSampler`), batched to the collector, and
 * PostgreSQL queries get spans; without one, a sampler that records nothing keeps the cost to
 * making ids.
 */
export async function startTracing(options: TracingOptions): Promise<Tracing> {
  if (installed && !installed.implicit) {
    throw new Error("tracing is already started in this process");
  }
  const processors: SpanProcessor[] = [];
  if (options.otlpEndpoint) {
    // Loaded only when exporting, so a process without a collector never loads the exporter.
    const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");
    const exporter = new OTLPTraceExporter({
      url: `${options.otlpEndpoint.replace(/\/+$/, "")}/v1/traces`,
    });
    processors.push(new BatchSpanProcessor({ exporter }));
  }
  const instrument = processors.length > 0 ? await pgInstrument() : undefined;
  installed?.uninstall();
  return install(options.serviceName, processors, { instrument });
}

/**
 * Makes sure trace context flows even when the process entry did not start tracing (tests, an
 * embedding program): installs the id-only mode under the name `rowbase`. Called by kit's gRPC
 * server and the gateway when they are built.
 */
export function ensureTracing(): void {
  if (!installed) install("rowbase", [], { implicit: true });
}

function install(
  serviceName: string,
  spanProcessors: SpanProcessor[],
  options: { implicit?: boolean; instrument?: Instrument | undefined },
): Installed {
  const recording = spanProcessors.length > 0;
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }),
    sampler: recording
      ? new ParentBasedSampler({ root: serverRootSampler })
      : new AlwaysOffSampler(),
    spanProcessors,
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  // Baggage from an outside caller is not passed on: only the trace context crosses hops.
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const undo = options.instrument?.(provider);
  const self: Installed = {
    recording,
    implicit: options.implicit ?? false,
    uninstall() {
      undo?.();
      trace.disable();
      context.disable();
      propagation.disable();
    },
    async shutdown() {
      if (installed !== self) return;
      installed = undefined;
      self.uninstall();
      await provider.shutdown();
    },
  };
  installed = self;
  return self;
}

/**
 * A trace is recorded when it starts at a server, a request or an RPC, other than a health
 * check, or at a consumer handling a batch of events of which one at least comes from a recorded
 * trace (its span links them: `inConsumerSpan`). Work that no caller started (migrations at
 * start, events no recorded trace wrote) would otherwise send a trace per query, and probes a
 * trace every few seconds per pod. An event's own trace is followed through its parent instead
 * (`ParentBasedSampler`).
 */
const serverRootSampler: Sampler = {
  shouldSample: (_context, _traceId, _name, kind, attributes, links) => ({
    decision:
      (kind === SpanKind.SERVER && !isHealthCheck(attributes)) ||
      (kind === SpanKind.CONSUMER && links.some((link) => isSampled(link.context.traceFlags)))
        ? SamplingDecision.RECORD_AND_SAMPLED
        : SamplingDecision.NOT_RECORD,
  }),
  toString: () => "ServerRootSampler",
};

function isSampled(traceFlags: number): boolean {
  return (traceFlags & TraceFlags.SAMPLED) !== 0;
}

function isHealthCheck(attributes: Attributes): boolean {
  const path = attributes["url.path"];
  return (
    attributes["rpc.service"] === "grpc.health.v1.Health" ||
    (typeof path === "string" && (path === "/health" || path.startsWith("/health/")))
  );
}

/** A string literal (`'...'`, `E'...'`, quotes doubled inside) or a numeric constant of SQL. */
const SQL_LITERAL = /(?:\bE)?'(?:[^']|'')*'|(?<![\w$."])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?\b/gi;

/**
 * A statement as a span may keep it: every literal as `?`. MikroORM writes the values of its
 * own statements into their text (inserts of password hashes, e-mail addresses, token hashes),
 * so the text as sent is no more fit for a collector than the parameters are.
 */
export function statementWithoutValues(text: string): string {
  return text.replace(SQL_LITERAL, "?");
}

/**
 * Spans for every query of `pg`: the statement text without its values (`statementWithoutValues`;
 * parameters are never recorded). MikroORM has imported `pg` before any entry point runs, so the
 * module is patched where it is, the one module object every importer shares, rather than
 * through a require hook, which would only see later loads.
 */
async function pgInstrument(): Promise<Instrument> {
  const { PgInstrumentation } = await import("@opentelemetry/instrumentation-pg");
  return (provider) => {
    const instrumentation = new PgInstrumentation({
      enabled: false,
      enhancedDatabaseReporting: false,
      requestHook: (span, { query }) => {
        span.setAttribute(ATTR_DB_QUERY_TEXT, statementWithoutValues(query.text));
      },
    });
    instrumentation.setTracerProvider(provider);
    const definitions = instrumentation.getModuleDefinitions().filter((d) => d.name === "pg");
    for (const definition of definitions) definition.patch?.(pg);
    return () => {
      for (const definition of definitions) definition.unpatch?.(pg);
    };
  };
}

/**
 * Runs background work (a relay's polling) outside any request's trace and unrecorded, so that
 * it neither joins the trace of the call that woke it nor floods the collector with its rounds.
 */
export function untraced<T>(work: () => T): T {
  return context.with(suppressTracing(ROOT_CONTEXT), work);
}

/** How a server reads one incoming header (Connect's `Headers`, Koa's `ctx.get`). */
export type HeaderReader = (name: string) => string | undefined;

const readerGetter: TextMapGetter<HeaderReader> = {
  get: (read, key) => read(key),
  keys: () => [],
};

export interface ServerSpanOptions {
  name: string;
  /** Reads the caller's `traceparent`; without a valid one the span starts a new trace. */
  header: HeaderReader;
  attributes?: Attributes;
}

/**
 * Runs `handle` inside a server span that continues the caller's trace, so that everything it
 * does (logs, outgoing calls, queries) belongs to the trace. The span ends when `handle`
 * settles; `handle` sets the outcome (status, attributes).
 */
export async function inServerSpan<T>(
  options: ServerSpanOptions,
  handle: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = propagation.extract(ROOT_CONTEXT, options.header, readerGetter);
  const span = trace
    .getTracer("@rowbase/kit")
    .startSpan(
      options.name,
      { kind: SpanKind.SERVER, ...(options.attributes ? { attributes: options.attributes } : {}) },
      parent,
    );
  try {
    return await context.with(trace.setSpan(parent, span), () => handle(span));
  } finally {
    span.end();
  }
}

export interface ConsumerSpanOptions {
  name: string;
  /**
   * The trace contexts (`traceparent`s) of the work that wrote the messages, one per distinct
   * context. One: the span continues that trace. Several (a batch of events of different
   * requests): the span starts a trace of its own and links each; it is recorded when one of
   * them is. None (events from before contexts were carried, or written by no traced work): a
   * trace of its own, unrecorded, so its logs still share a trace id.
   */
  traceparents: readonly string[];
  attributes?: Attributes;
}

/**
 * Runs `handle` (a consumer's handling of messages) inside a consumer span continuing, or
 * linking, the traces that wrote them, so that its logs, calls and queries belong to them. A
 * throw marks the span failed. Whatever context the consumer runs in (a publisher's, in the
 * memory bus; a relay's untraced one) is left out.
 */
export async function inConsumerSpan<T>(
  options: ConsumerSpanOptions,
  handle: (span: Span) => Promise<T>,
): Promise<T> {
  const contexts = options.traceparents.flatMap((traceparent) => {
    const extracted = trace.getSpanContext(
      propagation.extract(ROOT_CONTEXT, { [TRACEPARENT_HEADER]: traceparent }),
    );
    return extracted && isSpanContextValid(extracted) ? [extracted] : [];
  });
  const [only] = contexts;
  const parent =
    contexts.length === 1 && only ? trace.setSpanContext(ROOT_CONTEXT, only) : ROOT_CONTEXT;
  const links: Link[] = contexts.length > 1 ? contexts.map((linked) => ({ context: linked })) : [];
  const span = trace.getTracer("@rowbase/kit").startSpan(
    options.name,
    {
      kind: SpanKind.CONSUMER,
      links,
      ...(options.attributes ? { attributes: options.attributes } : {}),
    },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), () => handle(span));
  } catch (error) {
    if (error instanceof Error) span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    span.end();
  }
}

/** The active trace context as a `traceparent`, or "" outside any trace (or untraced work). */
export function activeTraceparent(): string {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier[TRACEPARENT_HEADER] ?? "";
}

/** Writes the active trace context (`traceparent`) into outgoing headers. */
export function injectTraceContext(headers: Record<string, string> | Headers): void {
  if (headers instanceof Headers) {
    propagation.inject(context.active(), headers, { set: (h, key, value) => h.set(key, value) });
  } else {
    propagation.inject(context.active(), headers);
  }
}

/** The trace id of the work under way, if any. */
export function activeTraceId(): string | undefined {
  const spanContext = trace.getSpanContext(context.active());
  return spanContext && isSpanContextValid(spanContext) ? spanContext.traceId : undefined;
}

/** Added to every log line (kit's logger mixin): the trace the line belongs to. */
export function traceLogFields(): { trace_id?: string } {
  const traceId = activeTraceId();
  return traceId ? { trace_id: traceId } : {};
}
