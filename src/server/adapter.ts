// Turns a ConnectRouter into a Node request handler, as connect-node's
// connectNodeAdapter does, except that: errors raised outside the interceptor
// chain are shaped like the rest (see request-errors.ts), each call's final
// status is recorded for the request log, and a failing handler is logged
// through our logger instead of the console.
import { Code, ConnectError, createConnectRouter, type ConnectRouter, type ConnectRouterOptions } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "../log.js";
import type { RequestHandler } from "./listener.js";
import { observeStatus } from "./call-status.js";
import { shapeResponseErrors } from "./request-errors.js";
import { callStatusFor } from "./request-log.js";

export interface AdapterOptions extends Partial<ConnectRouterOptions> {
  routes: (router: ConnectRouter) => void;
  /** Serves paths that are not RPCs (for example a web page); default 404. */
  fallback?: RequestHandler;
  logger: Logger;
}

export function createRequestHandler(options: AdapterOptions): RequestHandler {
  const router = createConnectRouter({ acceptCompression: [compressionGzip, compressionBrotli], ...options });
  options.routes(router);
  const paths = new Map<string, UniversalHandler>();
  const readMaxBytes = options.readMaxBytes ?? 0xffffffff;
  for (const handler of router.handlers) paths.set(handler.requestPath, shapeResponseErrors(handler, readMaxBytes));
  const notFound: RequestHandler = (_req, res) => {
    res.writeHead(404);
    res.end();
  };
  const fallback = options.fallback ?? notFound;
  return (req, res) => {
    const handler = paths.get(req.url?.split("?", 2)[0] ?? "");
    if (handler === undefined) {
      fallback(req, res);
      return;
    }
    const request = universalRequestFromNodeRequest(req, res as never, undefined, undefined);
    handler(request)
      .then((response) => {
        // Refused before its body was read: ask HTTP/1.1 clients not to reuse
        // the connection, whose next bytes would be the rest of that body.
        if (req.httpVersionMajor === 1 && !req.complete && !res.headersSent) res.setHeader("Connection", "close");
        const observed = observeStatus(req.headers["content-type"] ?? "", response, callStatusFor(req));
        return universalResponseToNodeResponse(observed, res as never);
      })
      .catch((reason: unknown) => {
        if (ConnectError.from(reason).code === Code.Aborted) return; // the client went away
        options.logger.error({ err: reason, procedure: handler.requestPath }, "handler failed");
        // Never leave the caller waiting: a bare 500, or a reset once the answer has begun.
        if (!res.headersSent) {
          res.writeHead(500);
          res.end();
        } else res.destroy();
      });
  };
}
