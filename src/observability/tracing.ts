// Installing OpenTelemetry tracing: a tracer provider that exports spans
// over OTLP/HTTP (JSON) in batches, registered globally with the
// AsyncLocalStorage context manager and the W3C propagator. Installed only
// when an endpoint is named (`--otlp-endpoint`, OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); otherwise the SDK is not even
// loaded and the OpenTelemetry API stays a no-op.
import { context, propagation, trace } from "@opentelemetry/api";

export interface TracingOptions {
  /** Where spans go: the OTLP/HTTP traces URL (see otlpTracesUrl). */
  url: string;
  /** service.name; default OTEL_SERVICE_NAME, else "synapse". */
  serviceName?: string;
  /** More resource attributes (OTEL_RESOURCE_ATTRIBUTES are read too). */
  attributes?: Record<string, string>;
  /** How long spans wait to be batched; default 5 s (OTEL_BSP_SCHEDULE_DELAY). */
  scheduledDelayMs?: number;
}

export interface Tracing {
  /** The traces URL spans are exported to. */
  readonly url: string;
  /** Exports every span ended so far. */
  flush(): Promise<void>;
  /** Exports what is left and uninstalls: the API is a no-op again. */
  shutdown(): Promise<void>;
}

const TRACES_PATH = "/v1/traces";

/** An http(s) URL; anything else is not an OTLP/HTTP endpoint (and "host:4318" parses with "host:" as its scheme). */
function httpUrl(value: string): URL {
  const url = new URL(value);
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`${value} is not an http or https URL`);
  return url;
}

/** A base URL as OTEL_EXPORTER_OTLP_ENDPOINT means it: the traces path is appended (unless it is there). */
function withTracesPath(base: string): string {
  const url = httpUrl(base);
  if (!url.pathname.endsWith(TRACES_PATH)) url.pathname = `${url.pathname.replace(/\/+$/, "")}${TRACES_PATH}`;
  return url.toString();
}

/**
 * The OTLP/HTTP traces URL to export to, or undefined for no tracing: the
 * `--otlp-endpoint` flag (a collector's base URL, http://host:4318, or the
 * full traces URL), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as it is),
 * else OTEL_EXPORTER_OTLP_ENDPOINT (a base URL). OTEL_SDK_DISABLED=true and
 * OTEL_TRACES_EXPORTER=none turn the environment's endpoints off. Throws
 * TypeError for a value that is not an http(s) URL.
 */
export function otlpTracesUrl(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (flag !== undefined) return withTracesPath(flag);
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true" || env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === "none") return undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return httpUrl(traces).toString();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? withTracesPath(base) : undefined;
}

/** Installs the SDK globally; spans from then on are exported to `options.url`. */
export async function installTracing(options: TracingOptions): Promise<Tracing> {
  const [{ NodeTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { detectResources, envDetector, resourceFromAttributes }] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
  ]);
  const serviceName = options.serviceName ?? process.env.OTEL_SERVICE_NAME ?? "synapse";
  const resource = resourceFromAttributes({ "service.name": serviceName, ...options.attributes }).merge(detectResources({ detectors: [envDetector] }));
  const exporter = new OTLPTraceExporter({ url: options.url });
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(exporter, options.scheduledDelayMs === undefined ? undefined : { scheduledDelayMillis: options.scheduledDelayMs })],
  });
  provider.register();
  let down: Promise<void> | undefined;
  return {
    url: options.url,
    flush: () => provider.forceFlush(),
    shutdown() {
      down ??= provider.shutdown().finally(() => {
        trace.disable();
        context.disable();
        propagation.disable();
      });
      return down;
    },
  };
}
