// One structured log line per call: procedure, protocol, HTTP version,
// status and duration. It wraps the whole HTTP handler, so calls refused
// before reaching a service (malformed or oversize requests, unknown paths)
// are logged too; the adapter fills in each call's status.
import type { Logger } from "../log.js";
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

export function protocolOf(contentType: string | undefined): string {
  if (contentType === undefined) return "connect";
  if (contentType.startsWith("application/grpc-web")) return "grpc-web";
  if (contentType.startsWith("application/grpc")) return "grpc";
  return "connect";
}

export function withRequestLog(handler: RequestHandler, logger: Logger): RequestHandler {
  return (req, res) => {
    const started = performance.now();
    const status = callStatusFor(req);
    let logged = false;
    const log = () => {
      if (logged) return;
      logged = true;
      const outcome =
        status.code !== undefined ? codeName(status.code) : res.writableFinished ? `http_${res.statusCode}` : "aborted";
      logger.info(
        {
          procedure: req.url?.split("?")[0],
          method: req.method,
          protocol: protocolOf(req.headers["content-type"]),
          http: req.httpVersion,
          status: outcome,
          http_status: res.statusCode,
          duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
          ...(status.message ? { error: status.message } : {}),
        },
        "call",
      );
    };
    res.once("finish", log);
    res.once("close", log);
    handler(req, res);
  };
}
