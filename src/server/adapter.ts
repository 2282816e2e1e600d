// Turns a ConnectRouter into a Node request handler, as connect-node's
// connectNodeAdapter does, except that: errors raised outside the interceptor
// chain are shaped like the rest (see request-errors.ts), deadlines longer
// than a timer holds are clamped (deadline.ts), a refused request's body is
// left flowing for the listener to drain rather than destroyed, each call's final
// status (its procedure, code and any refusal's protocol code) is recorded for
// the request log and the metrics, and a failing handler is logged
// through our logger instead of the console. Common calls are answered on the
// short paths (unary.ts, server-stream.ts); what they keep of connect-es's
// pipeline, and which calls they leave to it, is listed in short-call.ts.
import { Code, ConnectError, createConnectRouter, createContextValues, createMethodImplSpec, createServiceImplSpec, type ConnectRouter, type ConnectRouterOptions, type MethodImplSpec } from "@connectrpc/connect";
import { createMethodUrl, validateUniversalHandlerOptions, type UniversalHandler } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "../log.js";
import type { RequestHandler } from "./listener.js";
import { callStatusKey, observeStatus } from "./call-status.js";
import { clampDeadlineHeaders } from "./deadline.js";
import { shapeResponseErrors } from "./request-errors.js";
import { callStatusFor } from "./request-log.js";
import { serverStreamCall } from "./server-stream.js";
import type { ShortCall } from "./short-call.js";
import { unaryCall } from "./unary.js";

/** Replies smaller than this are sent uncompressed, whatever the client accepts. */
export const COMPRESS_MIN_BYTES = 32 * 1024;

export interface AdapterOptions extends Partial<ConnectRouterOptions> {
  routes: (router: ConnectRouter) => void;
  /** Serves paths that are not RPCs (for example a web page); default 404. */
  fallback?: RequestHandler;
  logger: Logger;
  /** Answer what the short paths can on them (default true); false sends every call through connect-es's own handlers. */
  shortPaths?: boolean;
}

// A request body the handler leaves unread (a refusal before the whole body
// arrived, or before it was read at all) flows on, and the listener drains and
// drops it. connect-node destroys the request instead when its reader stops
// early, resetting the stream before the listener can drain it, and a Node.js
// HTTP/2 client counts the unsent rest of every such body against its session
// memory (10 MB by default): some sixty refused 256 KiB uploads, and it
// refuses every new call on that connection (ENHANCE_YOUR_CALM).

/** The request body (after the bytes already read from it); when the reader stops early the request is not destroyed, and flows on. */
async function* bodyOf(req: Parameters<RequestHandler>[0], alreadyRead: Uint8Array[] = []): AsyncIterable<Uint8Array> {
  let complete = false;
  try {
    yield* alreadyRead;
    if (!req.readableEnded) yield* req.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>;
    complete = true;
  } finally {
    if (!complete) req.resume();
  }
}

export function createRequestHandler(options: AdapterOptions): RequestHandler {
  // Compressed requests are accepted; replies are compressed only when large (a result chunk, say):
  // compressing the small replies of a task's calls cost more CPU than everything else they do.
  const routerOptions = { acceptCompression: [compressionGzip, compressionBrotli], compressMinBytes: COMPRESS_MIN_BYTES, ...options };
  const router = createConnectRouter(routerOptions);
  const shortOptions = validateUniversalHandlerOptions(routerOptions);
  // The short paths (unary.ts, server-stream.ts) by request path.
  const short = new Map<string, ShortCall>();
  if (options.shortPaths === false) options.routes(router);
  else {
    options.routes(
      recordingRouter(router, (spec) => {
        const call = unaryCall(spec, shortOptions) ?? serverStreamCall(spec, shortOptions);
        if (call !== undefined) short.set(createMethodUrl("/", spec.method), call);
      }),
    );
  }
  const paths = new Map<string, UniversalHandler>();
  const readMaxBytes = options.readMaxBytes ?? 0xffffffff;
  for (const handler of router.handlers) paths.set(handler.requestPath, shapeResponseErrors(handler, readMaxBytes));
  const notFound: RequestHandler = (_req, res) => {
    res.writeHead(404);
    res.end();
  };
  const fallback = options.fallback ?? notFound;
  const standard = (req: Parameters<RequestHandler>[0], res: Parameters<RequestHandler>[1], handler: UniversalHandler, alreadyRead: Uint8Array[]) => {
    const status = callStatusFor(req);
    const values = createContextValues().set(callStatusKey, status);
    const request = { ...universalRequestFromNodeRequest(req, res as never, undefined, values), body: bodyOf(req, alreadyRead) };
    const readsWhileAnswering = handler.method.methodKind === "client_streaming" || handler.method.methodKind === "bidi_streaming";
    handler(request)
      .then((response) => {
        // Refused before its body was read: ask HTTP/1.1 clients not to reuse
        // the connection, whose next bytes would be the rest of that body.
        if (req.httpVersionMajor === 1 && !req.complete && !res.headersSent) res.setHeader("Connection", "close");
        // A unary or server-streaming handler has read all it will by the time it answers.
        if (!readsWhileAnswering && !req.complete) req.resume();
        const observed = observeStatus(req.headers["content-type"] ?? "", response, status);
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
  return (req, res) => {
    const path = req.url?.split("?", 2)[0] ?? "";
    const handler = paths.get(path);
    if (handler === undefined) {
      fallback(req, res);
      return;
    }
    clampDeadlineHeaders(req.headers);
    // The path as the router holds it: the same string for every call, so metrics key their cells by it.
    callStatusFor(req).procedure = handler.requestPath;
    const fast = short.get(path);
    if (fast !== undefined) fast(req, res, (alreadyRead) => standard(req, res, handler, alreadyRead));
    else standard(req, res, handler, []);
  };
}

/**
 * The router, telling `onMethod` each method implementation registered on it
 * (for the short paths). A service registered with options of its own
 * (interceptors, limits) is left to the standard path alone.
 */
function recordingRouter(router: ConnectRouter, onMethod: (spec: MethodImplSpec) => void): ConnectRouter {
  const recording: ConnectRouter = {
    get handlers() {
      return router.handlers;
    },
    service(service, implementation, options) {
      router.service(service, implementation, options);
      if (options === undefined) Object.values(createServiceImplSpec(service, implementation).methods).forEach(onMethod);
      return recording;
    },
    rpc(method, implementation, options) {
      router.rpc(method, implementation, options);
      if (options === undefined) onMethod(createMethodImplSpec(method, implementation));
      return recording;
    },
  };
  return recording;
}
