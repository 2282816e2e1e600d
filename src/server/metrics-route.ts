// GET /metrics: the server's metrics in the Prometheus text format, on the
// same port as the RPCs; every other path not an RPC goes on to `next`.
import type { Logger } from "../log.js";
import { METRICS_CONTENT_TYPE, type ServerMetrics } from "../observability/metrics.js";
import type { RequestHandler } from "./listener.js";

export const METRICS_PATH = "/metrics";

export function metricsRoute(metrics: ServerMetrics, next: RequestHandler, logger: Logger): RequestHandler {
  return (req, res) => {
    const path = (req.url ?? "").split("?", 1)[0];
    if (path !== METRICS_PATH) return next(req, res);
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { Allow: "GET, HEAD", "Content-Type": "text/plain; charset=utf-8" });
      res.end("GET /metrics\n");
      return;
    }
    metrics.text().then(
      (text) => {
        if (res.destroyed) return;
        const body = Buffer.from(text);
        res.writeHead(200, { "Content-Type": METRICS_CONTENT_TYPE, "Content-Length": String(body.byteLength), "Cache-Control": "no-store" });
        if (req.method === "HEAD") res.end();
        else res.end(body);
      },
      (error: unknown) => {
        logger.error({ err: error }, "could not collect metrics");
        if (res.headersSent || res.destroyed) return;
        res.writeHead(500, { "Content-Type": "text/plain; charset=utf-8" });
        res.end("metrics could not be collected\n");
      },
    );
  };
}
