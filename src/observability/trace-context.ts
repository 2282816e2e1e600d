// W3C Trace Context (https://www.w3.org/TR/trace-context/) as Synapse
// carries it: in an envelope header's `trace` field and in HTTP request
// headers. Parsing and formatting go through OpenTelemetry's W3C
// propagator, so an invalid value is ignored exactly as any OpenTelemetry
// service ignores it; the envelope's own field is still carried through
// unchanged (it is signed). Also: the ids a task carries from its request
// into every event and reply, and whether a tracer is installed at all.
import { context, ProxyTracerProvider, ROOT_CONTEXT, trace, type Context, type SpanContext, type TextMapGetter, type TextMapSetter } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { randomBytes } from "node:crypto";
import type { Header } from "../../gen/synapse/v1/envelope_pb.js";
import type { CarriedIds } from "../store/store.js";

const propagator = new W3CTraceContextPropagator();

/** The provider the API falls back to when no SDK is installed. */
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

/**
 * Whether an OpenTelemetry SDK is installed (by installTracing or by the
 * embedding application). When not, every instrumentation point returns at
 * once, before building a span or its attributes.
 */
export function tracingActive(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NOOP_PROVIDER;
}

/** A traceparent/tracestate pair, as an envelope or an HTTP request carries it. */
export interface TraceFields {
  traceparent?: string;
  tracestate?: string;
}

const fieldsGetter: TextMapGetter<TraceFields> = {
  keys: () => ["traceparent", "tracestate"],
  get: (carrier, key) => (key === "traceparent" ? carrier.traceparent : key === "tracestate" ? carrier.tracestate : undefined) || undefined,
};

const fieldsSetter: TextMapSetter<TraceFields> = {
  set: (carrier, key, value) => {
    if (key === "traceparent") carrier.traceparent = value;
    else if (key === "tracestate") carrier.tracestate = value;
  },
};

type NodeHeaders = Record<string, string | string[] | undefined>;

const headersGetter: TextMapGetter<NodeHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

/** The remote span context a traceparent names; undefined when it is absent or invalid. */
export function spanContextOf(fields: TraceFields | undefined): SpanContext | undefined {
  if (!fields?.traceparent) return undefined;
  return trace.getSpanContext(propagator.extract(ROOT_CONTEXT, fields, fieldsGetter));
}

/** `base` with the remote parent an incoming HTTP request names (traceparent, tracestate headers), if any. */
export function contextFromHttpHeaders(headers: NodeHeaders, base: Context = ROOT_CONTEXT): Context {
  if (headers.traceparent === undefined) return base;
  return propagator.extract(base, headers, headersGetter);
}

/** The traceparent (and tracestate) naming the span active in `ctx`, for an outgoing message or request; empty when none is. */
export function traceFieldsOf(ctx: Context = context.active()): TraceFields {
  const fields: TraceFields = {};
  propagator.inject(ctx, fields, fieldsSetter);
  return fields;
}

/** The same, as HTTP request headers. */
export function traceHeadersOf(ctx: Context = context.active()): Record<string, string> {
  const { traceparent, tracestate } = traceFieldsOf(ctx);
  const headers: Record<string, string> = {};
  if (traceparent) headers.traceparent = traceparent;
  if (tracestate) headers.tracestate = tracestate;
  return headers;
}

/**
 * A traceparent for a new trace, for a sender with no tracer installed:
 * random ids, flagged sampled so that receivers that do trace record it.
 */
export function freshTraceparent(): string {
  const bytes = randomBytes(24).toString("hex");
  return `00-${bytes.slice(0, 32)}-${bytes.slice(32)}-01`;
}

const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}/;

/** The trace id of a traceparent, for log lines; undefined when there is none or it does not parse. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  if (!traceparent) return undefined;
  const id = TRACEPARENT.exec(traceparent)?.[1];
  return id === undefined || id === "00000000000000000000000000000000" ? undefined : id;
}

/** The ids a task_request's header carries, kept with the task; undefined when it carries none. */
export function carriedOf(header: Header): CarriedIds | undefined {
  const traceparent = header.trace?.traceparent ?? "";
  const tracestate = header.trace?.tracestate ?? "";
  if (traceparent === "" && tracestate === "" && header.sessionId === "" && header.correlationId === "") return undefined;
  return { traceparent, tracestate, sessionId: header.sessionId, correlationId: header.correlationId };
}

/** Seal fields (envelope/seal.ts SealInput) carrying a task's ids, or a message's, through unchanged. */
export function carriedSealFields(carried: CarriedIds | undefined): { traceparent?: string; tracestate?: string; sessionId?: string; correlationId?: string } {
  if (carried === undefined) return {};
  return { traceparent: carried.traceparent, tracestate: carried.tracestate, sessionId: carried.sessionId, correlationId: carried.correlationId };
}

/**
 * The parent of a span about a task: the active context when it belongs to
 * the task's trace already (a span of the call that carries the task's
 * message), else the task's own trace context (a run resumed after a
 * restart, a push from the callback outbox), else the active context.
 */
export function taskParent(carried: TraceFields | undefined, active: Context = context.active()): Context {
  const remote = spanContextOf(carried);
  if (remote === undefined) return active;
  if (trace.getSpanContext(active)?.traceId === remote.traceId) return active;
  return trace.setSpanContext(active, remote);
}
