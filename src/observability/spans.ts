// The spans Synapse makes, through the OpenTelemetry API: a call's RPC, a
// message received, a message signed and sent, a callback pushed, a state
// transition and a handler run. Each helper first asks whether a tracer is
// installed and, when none is, runs the work and nothing else: no span, no
// attributes, no context. Parents come from the task's trace context (see
// trace-context.ts), so every span about a task lands in the task's trace.
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from "@opentelemetry/api";
import { ConnectError } from "@connectrpc/connect";
import type { Header, MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorDetailSchema } from "../../gen/synapse/v1/errors_pb.js";
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { protocolCodeName } from "../protocol/errors.js";
import { wireName } from "../protocol/message-types.js";
import { stateName } from "../protocol/state-machine.js";
import type { CarriedIds } from "../store/store.js";
import { freshTraceparent, spanContextOf, taskParent, traceFieldsOf, traceHeadersOf, tracingActive, type TraceFields } from "./trace-context.js";

/** Span attribute names; log lines use the same names with underscores (log-fields.ts). */
export const ATTR = {
  messageId: "synapse.message.id",
  messageType: "synapse.message.type",
  taskId: "synapse.task.id",
  taskType: "synapse.task.type",
  sender: "synapse.sender",
  receiver: "synapse.receiver",
  sessionId: "synapse.session.id",
  correlationId: "synapse.correlation.id",
  sequence: "synapse.sequence",
  state: "synapse.state",
  stateFrom: "synapse.state.from",
  stateTo: "synapse.state.to",
  agentId: "synapse.agent.id",
  attempt: "synapse.attempt",
  errorCode: "synapse.error.code",
  callbackUrl: "synapse.callback.url",
} as const;

let cached: { provider: unknown; tracer: Tracer } | undefined;

function tracer(): Tracer {
  const provider = trace.getTracerProvider();
  if (cached?.provider !== provider) cached = { provider, tracer: provider.getTracer("synapse") };
  return cached.tracer;
}

/** The header's identifying attributes. */
export function messageAttributes(header: Header): Attributes {
  const attributes: Attributes = {
    [ATTR.messageId]: header.messageId,
    [ATTR.messageType]: wireName(header.messageType),
    [ATTR.sender]: header.sender?.agentId ?? "",
    [ATTR.receiver]: header.receiver?.agentId ?? "",
  };
  if (header.taskId) attributes[ATTR.taskId] = header.taskId;
  if (header.sessionId) attributes[ATTR.sessionId] = header.sessionId;
  if (header.correlationId) attributes[ATTR.correlationId] = header.correlationId;
  if (header.sequence > 0n) attributes[ATTR.sequence] = Number(header.sequence);
  return attributes;
}

/** Marks a span failed with what `error` says (a protocol refusal's code, when it has one). */
export function recordFailure(span: Span, error: unknown): void {
  const connectError = error instanceof ConnectError ? error : undefined;
  if (connectError !== undefined) {
    try {
      const detail = connectError.findDetails(ErrorDetailSchema)[0];
      if (detail !== undefined) span.setAttribute(ATTR.errorCode, protocolCodeName(detail.code));
    } catch {
      // an undecodable detail says nothing more
    }
  }
  span.setStatus({ code: SpanStatusCode.ERROR, message: connectError?.rawMessage ?? (error instanceof Error ? error.message : String(error)) });
  if (error instanceof Error && connectError === undefined) span.recordException(error);
}

/** Runs `work` in a new span under `parent`; the span ends when the work settles. */
async function inSpan<T>(name: string, kind: SpanKind, parent: Context, attributes: Attributes, work: (span: Span) => Promise<T>): Promise<T> {
  const span = tracer().startSpan(name, { kind, attributes }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => work(span));
  } catch (error) {
    recordFailure(span, error);
    throw error;
  } finally {
    span.end();
  }
}

// ── the server side ─────────────────────────────────────────────────────

/** A verified message being acted on: "receive p2p:task_request", under the message's trace. */
export function receiving<T>(header: Header, agentId: string, work: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!tracingActive()) return work(undefined);
  const attributes = messageAttributes(header);
  attributes[ATTR.agentId] = agentId;
  return inSpan(`receive ${wireName(header.messageType)}`, SpanKind.CONSUMER, taskParent(header.trace), attributes, work);
}

/** Signing a message this agent sends or records ("send p2p:task_complete"); `seal` returns its header. */
export function sending<T extends { header: Header }>(type: MessageType, trace: TraceFields | undefined, seal: () => T): T {
  if (!tracingActive()) return seal();
  const span = tracer().startSpan(`send ${wireName(type)}`, { kind: SpanKind.PRODUCER }, taskParent(trace));
  try {
    const sealed = seal();
    span.setAttributes(messageAttributes(sealed.header));
    return sealed;
  } catch (error) {
    recordFailure(span, error);
    throw error;
  } finally {
    span.end();
  }
}

/** A task's state change being committed: "transition completed". */
export function transitioning<T>(taskId: string, from: TaskState, to: TaskState, carried: CarriedIds | undefined, work: () => Promise<T>): Promise<T> {
  if (!tracingActive()) return work();
  const attributes: Attributes = { [ATTR.taskId]: taskId, [ATTR.stateFrom]: stateName(from), [ATTR.stateTo]: stateName(to) };
  return inSpan(`transition ${stateName(to)}`, SpanKind.INTERNAL, taskParent(carried), attributes, () => work());
}

/** A handler's run: "handler summarization". */
export function runningHandler<T>(task: { taskId: string; taskType: string; attempt: number }, carried: CarriedIds | undefined, work: () => Promise<T>): Promise<T> {
  if (!tracingActive()) return work();
  const attributes: Attributes = { [ATTR.taskId]: task.taskId, [ATTR.taskType]: task.taskType, [ATTR.attempt]: task.attempt };
  return inSpan(`handler ${task.taskType}`, SpanKind.INTERNAL, taskParent(carried), attributes, () => work());
}

/** One callback push of an event ("deliver p2p:task_complete"); `work` gets the HTTP headers that carry the span. */
export function delivering<T>(event: Header, url: string, work: (headers: Record<string, string> | undefined) => Promise<T>): Promise<T> {
  if (!tracingActive()) return work(undefined);
  const attributes = messageAttributes(event);
  attributes[ATTR.callbackUrl] = url;
  return inSpan(`deliver ${wireName(event.messageType)}`, SpanKind.CLIENT, taskParent(event.trace), attributes, () => work(traceHeadersOf()));
}

// ── the client side ─────────────────────────────────────────────────────

/** What a client puts in a message it sends: the envelope's trace fields and the same as HTTP headers. */
export interface OutgoingTrace {
  fields: TraceFields;
  headers: Record<string, string>;
}

function outgoing(fields: TraceFields): OutgoingTrace {
  const headers: Record<string, string> = {};
  if (fields.traceparent) headers.traceparent = fields.traceparent;
  if (fields.tracestate) headers.tracestate = fields.tracestate;
  return { fields, headers };
}

/**
 * A client sending one message ("send p2p:task_request"). The message's
 * trace: the active span's when there is one, else `within` (the trace of
 * the task the message is about, when the client knows it), else a new
 * trace. With a tracer installed the span is made and its context goes out;
 * without one, the trace is passed on as it is, or made up of fresh ids.
 */
export function clientSending<T>(type: MessageType, taskId: string | undefined, within: TraceFields | undefined, work: (trace: OutgoingTrace) => Promise<T>): Promise<T> {
  if (!tracingActive()) {
    const active = traceFieldsOf();
    const fields = active.traceparent ? active : within?.traceparent && spanContextOf(within) ? within : { traceparent: freshTraceparent() };
    return work(outgoing(fields));
  }
  const attributes: Attributes = { [ATTR.messageType]: wireName(type) };
  if (taskId) attributes[ATTR.taskId] = taskId;
  const active = context.active();
  const parent = trace.getSpanContext(active) !== undefined ? active : taskParent(within, active);
  return inSpan(`send ${wireName(type)}`, SpanKind.CLIENT, parent, attributes, () => work(outgoing(traceFieldsOf())));
}

// ── calls ───────────────────────────────────────────────────────────────

/** The RPC span of one call, started when the request arrives, under the trace its HTTP headers name. */
export function startCallSpan(method: string | undefined, path: string, parent: Context): Span {
  return tracer().startSpan(`HTTP ${method ?? "GET"}`, { kind: SpanKind.SERVER, attributes: { "http.request.method": method ?? "GET", "url.path": path } }, parent);
}

/** gRPC status codes the semantic conventions count as a server's failure. */
const SERVER_FAULTS = new Set(["unknown", "deadline_exceeded", "unimplemented", "internal", "unavailable", "data_loss"]);

export interface CallEnd {
  /** "/synapse.v1.P2PService/Send", when the call was an RPC. */
  procedure?: string;
  protocol: string;
  httpVersion: string;
  /** How it ended: "ok", a code name, "http_415", "aborted". */
  outcome: string;
  code?: number | null;
  refusal?: string;
  httpStatus: number;
}

/** Names the call's span after its procedure and ends it with its status. */
export function endCallSpan(span: Span, end: CallEnd): void {
  span.setAttribute("network.protocol.version", end.httpVersion);
  span.setAttribute("http.response.status_code", end.httpStatus);
  if (end.procedure !== undefined) {
    const name = end.procedure.slice(1);
    const slash = name.lastIndexOf("/");
    span.updateName(name);
    span.setAttribute("rpc.system", end.protocol === "connect" ? "connect_rpc" : "grpc");
    span.setAttribute("rpc.service", name.slice(0, slash));
    span.setAttribute("rpc.method", name.slice(slash + 1));
    if (end.protocol === "connect") {
      if (end.code) span.setAttribute("rpc.connect_rpc.error_code", end.outcome);
    } else if (end.code !== undefined) {
      span.setAttribute("rpc.grpc.status_code", end.code ?? 0);
    }
  }
  if (end.refusal !== undefined) span.setAttribute(ATTR.errorCode, end.refusal);
  if (SERVER_FAULTS.has(end.outcome) || end.httpStatus >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: end.outcome });
  span.end();
}
