import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

// A collector for tests: a plain HTTP server that keeps the spans it is sent over OTLP/HTTP
// (JSON), each with its resource's service name.

export interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: number | string };
}
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: OtlpAttribute[];
  links?: { traceId: string; spanId: string }[];
  status?: { code?: number };
  events?: { name: string; attributes: OtlpAttribute[] }[];
}
export interface ExportedSpan extends OtlpSpan {
  serviceName: string | undefined;
}

export interface TestCollector {
  /** The OTLP/HTTP base URL, for `startTracing`'s `otlpEndpoint`. */
  url: string;
  /** The spans received so far. */
  exported: ExportedSpan[];
  close(): Promise<void>;
}

export async function startTestCollector(): Promise<TestCollector> {
  const exported: ExportedSpan[] = [];
  const collector = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      let body = Buffer.concat(chunks);
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      if (req.url === "/v1/traces") {
        const request = JSON.parse(body.toString("utf8"));
        for (const resourceSpans of request.resourceSpans ?? []) {
          const serviceName = resourceSpans.resource.attributes.find(
            (a: OtlpAttribute) => a.key === "service.name",
          )?.value.stringValue;
          for (const scope of resourceSpans.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) exported.push({ ...span, serviceName });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve));
  const { port } = collector.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    exported,
    close: () => new Promise((resolve) => collector.close(() => resolve())),
  };
}

/** A span's attribute, a string or a number. */
export function attribute(span: OtlpSpan, key: string) {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : Number(value.intValue));
}
