// One port for every protocol: each new plaintext connection is routed by
// its first bytes. The HTTP/2 connection preface means gRPC, or Connect and
// gRPC-web over h2c, and goes to the HTTP/2 server; anything else is
// HTTP/1.1. With TLS, ALPN picks h2 or http/1.1 instead.
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import type { Duplex } from "node:stream";
import type { TLSSocket } from "node:tls";

export const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface TlsFiles {
  cert: string | Buffer;
  key: string | Buffer;
}

export interface ListenerOptions {
  handler: RequestHandler;
  tls?: TlsFiles;
  /** Bytes a client may send before its first request is recognised. */
  sniffTimeoutMs?: number;
}

export interface Listener {
  readonly server: net.Server;
  listen(port: number, host: string): Promise<{ port: number; host: string }>;
  /** Stops accepting; asks HTTP/2 peers to go away and HTTP/1.1 peers to close after their request. */
  stopAccepting(): void;
  /** Destroys every connection still open. */
  destroyAll(): void;
  /** Requests currently being served. */
  inFlight(): number;
  /** Resolves when no request is in flight. */
  idle(): Promise<void>;
}

/**
 * Reads just enough of a new connection to tell HTTP/2 from HTTP/1.1, then
 * puts the bytes back for the server that takes it.
 */
function sniff(socket: net.Socket, timeoutMs: number, route: (isHttp2: boolean) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  const finish = (isHttp2: boolean) => {
    clearTimeout(timer);
    socket.off("data", onData);
    socket.off("error", onError);
    socket.pause();
    socket.unshift(seen);
    route(isHttp2);
    // Servers that consume the stream themselves resume it; HTTP/1.1 needs a nudge.
    process.nextTick(() => socket.resume());
  };
  const onData = (chunk: Buffer) => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, HTTP2_PREFACE.length);
    if (!seen.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n))) finish(false);
    else if (seen.length >= HTTP2_PREFACE.length) finish(true);
  };
  const onError = () => {
    clearTimeout(timer);
    socket.destroy();
  };
  socket.on("data", onData);
  socket.on("error", onError);
}

/** How much of a refused request body is read and dropped before the connection is cut. */
const MAX_DRAIN_BYTES = 16 * 1024 * 1024;
const HTTP2_QUIET_MS = 500;

/**
 * A handler that refuses a request early (too large, say) leaves the rest of
 * its body unread; the client then blocks writing it and the call never
 * ends. The rest is read and dropped; a body that goes on too long is cut
 * off.
 */
function drainUnreadBody(req: http.IncomingMessage | http2.Http2ServerRequest): void {
  if (req.complete) return;
  if ("stream" in req) {
    const stream = req.stream;
    if (stream.closed || stream.destroyed) return;
    // A client may also just stop sending and leave the stream half-open: once
    // it has been quiet for a moment, reset the stream without error
    // (RFC 9113 §8.1), which lets the response, already flushed, stand.
    const reset = (code: number) => {
      stream.close(code);
      stream.destroy(); // the readable side would otherwise wait for an END_STREAM that never comes
    };
    let drained = 0;
    let quiet = setTimeout(() => reset(http2.constants.NGHTTP2_NO_ERROR), HTTP2_QUIET_MS);
    stream.on("data", (chunk: Buffer) => {
      drained += chunk.byteLength;
      clearTimeout(quiet);
      if (drained > MAX_DRAIN_BYTES) reset(http2.constants.NGHTTP2_CANCEL);
      else quiet = setTimeout(() => reset(http2.constants.NGHTTP2_NO_ERROR), HTTP2_QUIET_MS);
    });
    stream.once("close", () => clearTimeout(quiet));
    stream.resume();
    return;
  }
  const socket = req.socket;
  if (!socket || socket.destroyed) return;
  let drained = 0;
  req.on("data", (chunk: Buffer) => {
    drained += chunk.byteLength;
    if (drained > MAX_DRAIN_BYTES) socket.destroy();
  });
  req.resume();
}

export function createListener(options: ListenerOptions): Listener {
  const sockets = new Set<Duplex>();
  const sessions = new Set<http2.Http2Session>();
  let requests = 0;
  let idleWaiters: Array<() => void> = [];
  let stopping = false;

  const track: RequestHandler = (req, res) => {
    requests++;
    let done = false;
    const finished = () => {
      if (done) return;
      done = true;
      requests--;
      if (requests === 0) {
        const waiters = idleWaiters;
        idleWaiters = [];
        waiters.forEach((resolve) => resolve());
      }
    };
    res.once("close", finished);
    res.once("finish", finished);
    // Http2ServerResponse emits 'finish' only once its stream closes; the
    // stream's own 'finish' is when the response has been written.
    ("stream" in res ? res.stream : res).once("finish", () => drainUnreadBody(req));
    if (stopping && "setHeader" in res && req.httpVersionMajor === 1) {
      (res as http.ServerResponse).setHeader("Connection", "close");
    }
    options.handler(req, res);
  };

  const h1 = http.createServer(track as http.RequestListener);
  let h2: http2.Http2Server | http2.Http2SecureServer;
  let server: net.Server;
  if (options.tls) {
    h2 = http2.createSecureServer(
      { cert: options.tls.cert, key: options.tls.key, allowHTTP1: true, ALPNProtocols: ["h2", "http/1.1"] },
      track as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
    );
    server = h2 as unknown as net.Server;
    h2.on("secureConnection", (socket: TLSSocket) => {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
    });
  } else {
    h2 = http2.createServer({}, track as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void);
    server = net.createServer((socket) => {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
      sniff(socket, options.sniffTimeoutMs ?? 10_000, (isHttp2) => {
        (isHttp2 ? h2 : h1).emit("connection", socket);
      });
    });
  }
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    if (stopping) session.close();
  });
  // A broken client must never take the process down.
  h1.on("clientError", (_error, socket) => socket.destroy());
  h2.on("sessionError", () => undefined);
  server.on("error", () => undefined);

  return {
    server,
    listen(port, host) {
      return new Promise((resolve, reject) => {
        const onError = (error: Error) => reject(error);
        server.once("error", onError);
        server.listen(port, host, () => {
          server.off("error", onError);
          const address = server.address() as net.AddressInfo;
          resolve({ port: address.port, host: address.address });
        });
      });
    },
    stopAccepting() {
      stopping = true;
      server.close();
      h1.closeIdleConnections();
      for (const session of sessions) session.close();
    },
    destroyAll() {
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
      h1.closeAllConnections();
    },
    inFlight: () => requests,
    idle() {
      return requests === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}
