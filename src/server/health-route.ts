// GET /healthz: the server's overall gRPC health status as plain HTTP, for
// load balancers and container probes that speak no gRPC. 200 while the
// server serves, 503 once it drains or reports NOT_SERVING; every other path
// goes on to `next`.
import { ServingStatus, type ServerHealth } from "./health.js";
import type { RequestHandler } from "./listener.js";

export const HEALTH_PATH = "/healthz";

export function healthRoute(health: ServerHealth, next: RequestHandler): RequestHandler {
  return (req, res) => {
    const path = (req.url ?? "").split("?", 1)[0];
    if (path !== HEALTH_PATH) return next(req, res);
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { Allow: "GET, HEAD", "Content-Type": "text/plain; charset=utf-8" });
      res.end("GET /healthz\n");
      return;
    }
    const status = health.get("") ?? ServingStatus.UNKNOWN;
    const body = Buffer.from(`${JSON.stringify({ status: ServingStatus[status] })}\n`);
    res.writeHead(status === ServingStatus.SERVING ? 200 : 503, {
      "Content-Type": "application/json",
      "Content-Length": String(body.byteLength),
      "Cache-Control": "no-store",
    });
    if (req.method === "HEAD") res.end();
    else res.end(body);
  };
}
