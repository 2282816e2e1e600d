// One port for every protocol: each new plaintext connection is routed by
// its first bytes. The HTTP/2 connection preface means gRPC, or Connect and
// gRPC-web over h2c, and goes to the HTTP/2 server; anything else is
// HTTP/1.1. With TLS, ALPN picks h2 or http/1.1 instead. Every connection is
// counted and timed by connection-limits.ts.
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import type { Duplex } from "node:stream";
import tls, { type TLSSocket } from "node:tls";
import type { Logger } from "../log.js";
import { ConnectionTable, type ConnectionLimitOptions, type ConnectionLimits } from "./connection-limits.js";

export const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface TlsFiles {
  cert: string | Buffer;
  key: string | Buffer;
}

export interface ListenerOptions extends ConnectionLimitOptions {
  handler: RequestHandler;
  tls?: TlsFiles;
  logger?: Logger;
}

export interface Listener {
  readonly server: net.Server;
  /** The connection limits in force, defaults filled in. */
  readonly limits: ConnectionLimits;
  listen(port: number, host: string): Promise<{ port: number; host: string }>;
  /** Stops accepting; asks HTTP/2 peers to go away and HTTP/1.1 peers to close after their request. */
  stopAccepting(): void;
  /** Destroys every connection still open. */
  destroyAll(): void;
  /** Requests currently being served. */
  inFlight(): number;
  /** Connections currently open. */
  connections(): number;
  /** Resolves when no request is in flight. */
  idle(): Promise<void>;
}

/**
 * Reads just enough of a new connection to tell HTTP/2 from HTTP/1.1, then
 * puts the bytes back for the server that takes it. How long it may take is
 * the header timeout's business (connection-limits.ts).
 */
function sniff(socket: net.Socket, route: (isHttp2: boolean) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  const finish = (isHttp2: boolean) => {
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
  const onError = () => socket.destroy();
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

/**
 * What Node's HTTP/1.1 parser refused (a malformed request, headers over
 * the limit) is answered 400 or 431 and the connection closed, as Node does
 * when nothing else listens; a response already on its way is finished first.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  // Node sets _httpMessage to null once a response has let go of the socket.
  const inFlight = (socket as Duplex & { _httpMessage?: http.ServerResponse | null })._httpMessage ?? undefined;
  if (inFlight !== undefined && !inFlight.writableEnded) {
    inFlight.shouldKeepAlive = false;
    inFlight.once("finish", () => socket.end());
    inFlight.once("close", () => socket.destroy());
    return;
  }
  if (!socket.writable || (inFlight !== undefined && inFlight.headersSent)) {
    socket.destroy();
    return;
  }
  const status = error.code === "HPE_HEADER_OVERFLOW" ? "431 Request Header Fields Too Large" : "400 Bad Request";
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  setTimeout(() => socket.destroy(), 1000).unref();
}

export function createListener(options: ListenerOptions): Listener {
  const table = new ConnectionTable(options, options.logger);
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
    table.callStarted(req, res);
    // Http2ServerResponse emits 'finish' only once its stream closes; the
    // stream's own 'finish' is when the response has been written.
    ("stream" in res ? res.stream : res).once("finish", () => drainUnreadBody(req));
    if (stopping && "setHeader" in res && req.httpVersionMajor === 1) {
      (res as http.ServerResponse).setHeader("Connection", "close");
    }
    options.handler(req, res);
  };

  const h1 = http.createServer(track as http.RequestListener);
  // Advertised in Keep-Alive: timeout=...; the connection table enforces it.
  h1.keepAliveTimeout = table.limits.idleTimeoutMs;
  const h2 = http2.createServer({}, track as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void);
  const handOver = (socket: Duplex, isHttp2: boolean) =>
    table.route(socket, isHttp2, () => (isHttp2 ? h2 : h1).emit("connection", socket));

  // TLS is terminated here too, not by a listening TLS server, so that every
  // connection is counted and timed from its first byte; ALPN picks the server.
  let tlsServer: tls.Server | undefined;
  if (options.tls) {
    tlsServer = tls.createServer({ cert: options.tls.cert, key: options.tls.key, ALPNProtocols: ["h2", "http/1.1"] });
    tlsServer.on("secureConnection", (socket: TLSSocket) => {
      if (!table.secured(socket)) return void socket.destroy();
      handOver(socket, socket.alpnProtocol === "h2");
    });
    tlsServer.on("tlsClientError", (_error, socket) => socket.destroy());
  }
  const server = net.createServer((socket) => {
    if (!table.admit(socket, tlsServer !== undefined)) return;
    if (tlsServer) tlsServer.emit("connection", socket);
    else sniff(socket, (isHttp2) => handOver(socket, isHttp2));
  });
  h2.on("session", (session) => {
    table.sessionStarted(session);
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    if (stopping) session.close();
  });
  // A broken client must never take the process down, and gets an answer when it can still take one.
  h1.on("clientError", answerClientError);
  h2.on("sessionError", () => undefined);
  server.on("error", () => undefined);

  return {
    server,
    limits: table.limits,
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
      table.closeIdle();
      for (const session of sessions) session.close();
    },
    destroyAll() {
      for (const session of sessions) session.destroy();
      table.destroyAll();
    },
    inFlight: () => requests,
    connections: () => table.size,
    idle() {
      return requests === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}
