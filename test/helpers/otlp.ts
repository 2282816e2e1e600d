// A small OTLP/HTTP trace receiver on 127.0.0.1: it takes the JSON
// encoding OpenTelemetry's HTTP exporter sends to POST /v1/traces and keeps
// every span, flattened, for tests to look at.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

/** OTLP span kinds (the API's SpanKind + 1). */
export const OTLP_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** The resource's attributes (service.name, ...). */
  resource: Record<string, string | number | boolean>;
  statusCode: number;
}

export interface OtlpReceiver {
  /** The receiver's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  url: string;
  spans: ReceivedSpan[];
  /** The paths requests came to. */
  paths: string[];
  close(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
type OtlpAttribute = { key: string; value: OtlpValue };

/** Ids may come as hex (the JSON encoding's rule) or base64 (protobuf JSON's); hex either way. */
function hex(id: string | undefined): string {
  if (id === undefined || id === "") return "";
  return /^[0-9a-f]+$/.test(id) ? id : Buffer.from(id, "base64").toString("hex");
}

function attributes(list: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) out[key] = value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.boolValue ?? value.doubleValue ?? ""));
  return out;
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const paths: string[] = [];
  const server = createServer((req, res) => {
    paths.push(req.url ?? "");
    body(req).then(
      (bytes) => {
        if (!String(req.headers["content-type"]).startsWith("application/json")) {
          res.writeHead(415).end();
          return;
        }
        const parsed = JSON.parse(bytes.toString()) as {
          resourceSpans?: Array<{ resource?: { attributes?: OtlpAttribute[] }; scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }> }>;
        };
        for (const resourceSpans of parsed.resourceSpans ?? []) {
          const resource = attributes(resourceSpans.resource?.attributes);
          for (const scope of resourceSpans.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              spans.push({
                traceId: hex(span.traceId as string),
                spanId: hex(span.spanId as string),
                parentSpanId: hex(span.parentSpanId as string | undefined),
                name: span.name as string,
                kind: span.kind as number,
                attributes: attributes(span.attributes as OtlpAttribute[]),
                resource,
                statusCode: (span.status as { code?: number } | undefined)?.code ?? 0,
              });
            }
          }
        }
        res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
      },
      () => res.writeHead(400).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
