// One structured log line per call: procedure, protocol, HTTP version,
// status and duration, and for a Send the message it carried (trace id,
// message id and type, task, sender, receiver, the task's state after it).
// It wraps the whole HTTP handler, so calls refused before reaching a
// service (malformed or oversize requests, unknown paths) are logged too;
// the adapter fills in each call's status. The same place counts each RPC
// and each refusal in the server's metrics, and, when a tracer is
// installed, makes each call's span (under the trace its traceparent
// header names) and runs the call in it.
import { context, trace } from "@opentelemetry/api";
import type { Logger } from "../log.js";
import { messageLogFields } from "../observability/log-fields.js";
import type { RpcProtocol, ServerMetrics } from "../observability/metrics.js";
import { endCallSpan, startCallSpan } from "../observability/spans.js";
import { contextFromHttpHeaders, traceIdOf, tracingActive } from "../observability/trace-context.js";
import { protocolCodeName } from "../protocol/errors.js";
import { codeName, type CallStatus } from "./call-status.js";
import type { RequestHandler } from "./listener.js";

const statusByRequest = new WeakMap<object, CallStatus>();

/** The status record of a request, shared between the adapter and the log. */
export function callStatusFor(req: object): CallStatus {
  let status = statusByRequest.get(req);
  if (status === undefined) {
    status = {};
    statusByRequest.set(req, status);
  }
  return status;
}

export function protocolOf(contentType: string | undefined): RpcProtocol {
  if (contentType === undefined) return "connect";
  if (contentType.startsWith("application/grpc-web")) return "grpc-web";
  if (contentType.startsWith("application/grpc")) return "grpc";
  return "connect";
}

export interface RequestLogOptions {
  logger: Logger;
  /** Where each RPC and each refusal is counted. */
  metrics?: ServerMetrics;
}

export function withRequestLog(handler: RequestHandler, { logger, metrics }: RequestLogOptions): RequestHandler {
  return (req, res) => {
    const started = performance.now();
    const status = callStatusFor(req);
    const path = req.url?.split("?")[0] ?? "";
    const parent = tracingActive() ? contextFromHttpHeaders(req.headers) : undefined;
    const span = parent === undefined ? undefined : startCallSpan(req.method, path, parent);
    let logged = false;
    const log = () => {
      if (logged) return;
      logged = true;
      const seconds = (performance.now() - started) / 1000;
      const outcome = status.code !== undefined ? codeName(status.code) : res.writableFinished ? `http_${res.statusCode}` : "aborted";
      const protocol = protocolOf(req.headers["content-type"]);
      if (metrics !== undefined && status.procedure !== undefined) {
        metrics.rpc(status.procedure, protocol, outcome, seconds);
        if (status.refusal !== undefined) metrics.refusal(status.procedure, status.refusal);
      }
      const refusal = status.refusal === undefined ? undefined : protocolCodeName(status.refusal);
      if (span !== undefined) {
        endCallSpan(span, { procedure: status.procedure, protocol, httpVersion: req.httpVersion, outcome, code: status.code, refusal, httpStatus: res.statusCode });
      }
      if (!logger.isLevelEnabled("info")) return;
      const about = status.envelope === undefined ? undefined : messageLogFields(status.envelope, status.taskState);
      const header = req.headers.traceparent;
      // A Send's line is about its message: its trace id is the message's own (its task's) when it has one.
      const traceId = about?.trace_id ?? span?.spanContext().traceId ?? traceIdOf(typeof header === "string" ? header : undefined);
      logger.info(
        {
          procedure: path,
          method: req.method,
          protocol,
          http: req.httpVersion,
          status: outcome,
          http_status: res.statusCode,
          duration_ms: Math.round(seconds * 1_000_000) / 1000,
          ...about,
          trace_id: traceId,
          error_code: refusal,
          error: status.message || undefined,
        },
        "call",
      );
    };
    res.once("finish", log);
    res.once("close", log);
    if (span === undefined) handler(req, res);
    else context.with(trace.setSpan(parent!, span), () => handler(req, res));
  };
}
