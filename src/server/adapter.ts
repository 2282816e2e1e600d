// Turns a ConnectRouter into a Node request handler, as connect-node's
// connectNodeAdapter does, except that: errors raised outside the interceptor
// chain are shaped like the rest (see request-errors.ts), deadlines longer
// than a timer holds are clamped (deadline.ts), a refused request's body is
// left flowing for the listener to drain rather than destroyed, each call's final
// status is recorded for the request log, and a failing handler is logged
// through our logger instead of the console.
import { Code, ConnectError, createConnectRouter, type ConnectRouter, type ConnectRouterOptions } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "../log.js";
import type { RequestHandler } from "./listener.js";
import { observeStatus } from "./call-status.js";
import { clampDeadlineHeaders } from "./deadline.js";
import { shapeResponseErrors } from "./request-errors.js";
import { callStatusFor } from "./request-log.js";

/** Replies smaller than this are sent uncompressed, whatever the client accepts. */
export const COMPRESS_MIN_BYTES = 32 * 1024;

export interface AdapterOptions extends Partial<ConnectRouterOptions> {
  routes: (router: ConnectRouter) => void;
  /** Serves paths that are not RPCs (for example a web page); default 404. */
  fallback?: RequestHandler;
  logger: Logger;
}

// A request body the handler leaves unread (a refusal before the whole body
// arrived, or before it was read at all) flows on, and the listener drains and
// drops it. connect-node destroys the request instead when its reader stops
// early, resetting the stream before the listener can drain it, and a Node.js
// HTTP/2 client counts the unsent rest of every such body against its session
// memory (10 MB by default): some sixty refused 256 KiB uploads, and it
// refuses every new call on that connection (ENHANCE_YOUR_CALM).

/** The request body; when the reader stops early the request is not destroyed, and flows on. */
async function* bodyOf(req: Parameters<RequestHandler>[0]): AsyncIterable<Uint8Array> {
  let complete = false;
  try {
    yield* req.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>;
    complete = true;
  } finally {
    if (!complete) req.resume();
  }
}

export function createRequestHandler(options: AdapterOptions): RequestHandler {
  // Compressed requests are accepted; replies are compressed only when large (a result chunk, say):
  // compressing the small replies of a task's calls cost more CPU than everything else they do.
  const router = createConnectRouter({ acceptCompression: [compressionGzip, compressionBrotli], compressMinBytes: COMPRESS_MIN_BYTES, ...options });
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
    clampDeadlineHeaders(req.headers);
    const request = { ...universalRequestFromNodeRequest(req, res as never, undefined, undefined), body: bodyOf(req) };
    const readsWhileAnswering = handler.method.methodKind === "client_streaming" || handler.method.methodKind === "bidi_streaming";
    handler(request)
      .then((response) => {
        // Refused before its body was read: ask HTTP/1.1 clients not to reuse
        // the connection, whose next bytes would be the rest of that body.
        if (req.httpVersionMajor === 1 && !req.complete && !res.headersSent) res.setHeader("Connection", "close");
        // A unary or server-streaming handler has read all it will by the time it answers.
        if (!readsWhileAnswering && !req.complete) req.resume();
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
