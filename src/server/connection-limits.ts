// Bounds the one-port listener's connections in number and in time. The
// HTTP servers behind it never listen() themselves, so Node's own
// headersTimeout/requestTimeout checks never run; these do the same job per
// connection, for HTTP/1.1 and HTTP/2 alike. Only what the client owes is
// timed (its first bytes, headers, request body) and connections with nothing
// in flight: a long server stream (Watch, ReadResult) is never cut for being
// long, only when its client stops reading it.
import type http from "node:http";
import http2 from "node:http2";
import type net from "node:net";
import type { Duplex, Writable } from "node:stream";
import type { TLSSocket } from "node:tls";
import type { Logger } from "../log.js";
import { resolveLimits, type ConnectionLimitOptions, type ConnectionLimits } from "./connection-limit-defaults.js";

export {
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_HEADER_TIMEOUT_MS,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_WRITE_TIMEOUT_MS,
  defaultMaxConnections,
  MAX_CONNECTIONS_CEILING,
  resolveLimits,
} from "./connection-limit-defaults.js";
export type { ConnectionLimitOptions, ConnectionLimits } from "./connection-limit-defaults.js";

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

/** What a connection waits for: the client's headers, a next request, request bodies, or the server. */
type Phase = "headers" | "idle" | "body" | "busy";
const PHASES: readonly Phase[] = ["headers", "idle", "body", "busy"];

/** Requests whose bodies are timed by progress, not in total (uploads: see timeBodyByProgress). */
const progressTimed = new WeakSet<object>();

/**
 * Times a request's body by progress instead of in total: it is cut only
 * when no bytes arrive for the body timeout. For uploads, which may
 * rightly take longer than any fixed time.
 */
export function timeBodyByProgress(req: Request): void {
  progressTimed.add(req);
}

interface Call {
  readonly req: Request;
  readonly out: Writable;
  readonly started: number;
  bodyDone: boolean;
  /** The connection's bytes read when the body last made progress, and when (progress-timed bodies). */
  bodyRead: number;
  bodyProgressAt: number;
  /** Bytes written but not yet taken by the connection, and when that last went down. */
  pending: number;
  progressAt: number;
}

function markBodyDone(conn: Connection, call: Call): void {
  if (call.bodyDone) return;
  call.bodyDone = true;
  if (conn.calls.has(call)) conn.bodiesDone++;
}

/** Whether `call` was still one of the connection's calls. */
function removeCall(conn: Connection, call: Call): boolean {
  if (!conn.calls.delete(call)) return false;
  if (call.bodyDone) conn.bodiesDone--;
  return true;
}

class Connection {
  /** What the HTTP server reads: the TCP socket, or TLS over it. */
  socket: Duplex;
  protocol: "pending" | "http1" | "h2" = "pending";
  session?: http2.Http2Session;
  served = false;
  closing = false;
  phase: Phase = "headers";
  since: number;
  idleBytes = 0;
  readonly calls = new Set<Call>();
  /** How many of `calls` have their whole body (kept as a count: a connection may carry thousands of streams). */
  bodiesDone = 0;
  constructor(
    readonly raw: net.Socket,
    now: number,
  ) {
    this.socket = raw;
    this.since = now;
  }
}

const REQUEST_TIMEOUT = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
const CLOSE_GRACE_MS = 1000;
const REPORT_EVERY_MS = 10_000;

function bodyComplete(req: Request): boolean {
  if ("stream" in req) return req.stream.destroyed || req.stream.state.remoteClose === 1;
  return req.complete;
}

function addressKey(socket: net.Socket): string {
  return `${socket.remoteAddress}|${socket.remotePort}|${socket.localAddress}|${socket.localPort}`;
}

export class ConnectionTable {
  readonly limits: ConnectionLimits;
  readonly #logger: Logger | undefined;
  readonly #open = new Set<Connection>();
  /** Each in insertion order, so the first is the one waiting longest. */
  readonly #phases = new Map<Phase, Set<Connection>>(PHASES.map((phase) => [phase, new Set()]));
  readonly #bySocket = new WeakMap<object, Connection>();
  /** TLS handshakes in progress, by address: the TLS socket is made out of our sight. */
  readonly #byAddress = new Map<string, Connection>();
  #routing: Connection | undefined;
  readonly #timer: NodeJS.Timeout;
  #counts = { shed: 0, refused: 0, header_timeout: 0, body_timeout: 0, write_timeout: 0 };
  #reportedAt = Date.now();

  constructor(options: ConnectionLimitOptions, logger?: Logger) {
    this.limits = resolveLimits(options);
    this.#logger = logger;
    const timeouts = [this.limits.headerTimeoutMs, this.limits.bodyTimeoutMs, this.limits.idleTimeoutMs, this.limits.writeTimeoutMs].filter((t) => t > 0);
    const every = Math.min(1000, Math.max(10, Math.min(...timeouts, 4000) / 4));
    this.#timer = setInterval(() => this.#sweep(), every).unref();
  }

  get size(): number {
    return this.#open.size;
  }

  /** A new TCP connection: tracked, or closed at once when the cap is reached and nothing can be shed. */
  admit(raw: net.Socket, tls = false): boolean {
    raw.on("error", () => undefined); // whoever reads it handles errors; none may crash the process
    if (this.limits.maxConnections > 0 && this.#open.size >= this.limits.maxConnections && !this.#shedOne()) {
      this.#counts.refused++;
      raw.destroy();
      return false;
    }
    const conn = new Connection(raw, Date.now());
    this.#open.add(conn);
    this.#phases.get("headers")!.add(conn);
    this.#bySocket.set(raw, conn);
    const key = tls ? addressKey(raw) : undefined;
    if (key !== undefined) this.#byAddress.set(key, conn);
    raw.once("close", () => {
      if (key !== undefined && this.#byAddress.get(key) === conn) this.#byAddress.delete(key);
      this.#forget(conn);
    });
    return true;
  }

  /** The TLS socket made over a tracked connection, once its handshake is done. */
  secured(socket: TLSSocket): boolean {
    const key = addressKey(socket);
    const conn = this.#byAddress.get(key);
    if (conn === undefined || conn.closing) return false;
    this.#byAddress.delete(key);
    conn.socket = socket;
    this.#bySocket.set(socket, conn);
    return true;
  }

  /** Runs `handOver` (which gives `socket` to an HTTP server) knowing which connection a new HTTP/2 session belongs to. */
  route(socket: Duplex, isHttp2: boolean, handOver: () => void): void {
    const conn = this.#bySocket.get(socket);
    if (conn === undefined) return void socket.destroy();
    conn.protocol = isHttp2 ? "h2" : "http1";
    this.#routing = conn;
    try {
      handOver();
    } finally {
      this.#routing = undefined;
    }
  }

  sessionStarted(session: http2.Http2Session): void {
    const conn = this.#routing;
    if (conn === undefined) return;
    conn.session = session;
    this.#bySocket.set(session, conn);
  }

  /** A request whose headers are in: its body is timed from now, and its response while it cannot write. */
  callStarted(req: Request, res: Response): void {
    const conn = "stream" in req ? this.#bySocket.get(req.stream.session as object) : this.#bySocket.get(req.socket);
    if (conn === undefined) return;
    const now = Date.now();
    const out: Writable = "stream" in res ? res.stream : res;
    const call: Call = { req, out, started: now, bodyDone: false, bodyRead: conn.raw.bytesRead, bodyProgressAt: now, pending: 0, progressAt: now };
    conn.served = true;
    conn.calls.add(call);
    this.#refresh(conn, now);
    req.once("end", () => {
      markBodyDone(conn, call);
      this.#refresh(conn, Date.now());
    });
    const drained = () => (call.progressAt = Date.now());
    out.on("drain", drained);
    const ended = () => {
      // Node may keep a closed HTTP/2 stream until a full GC (its native handle
      // does while the socket still holds its writes): left on it, this
      // listener would keep the call's request reachable that long too.
      out.off("drain", drained);
      if (removeCall(conn, call)) this.#refresh(conn, Date.now());
    };
    res.once("finish", ended);
    res.once("close", ended);
  }

  /** For shutdown: closes HTTP/1.1 connections that wait for a next request. */
  closeIdle(): void {
    for (const conn of [...this.#phases.get("idle")!]) if (conn.protocol === "http1") this.#destroy(conn);
  }

  destroyAll(): void {
    clearInterval(this.#timer);
    for (const conn of [...this.#open]) this.#destroy(conn);
  }

  #forget(conn: Connection): void {
    if (!this.#open.delete(conn)) return;
    this.#phases.get(conn.phase)!.delete(conn);
  }

  #destroy(conn: Connection): void {
    this.#forget(conn);
    conn.session?.destroy();
    conn.socket.destroy();
    conn.raw.destroy();
  }

  #setPhase(conn: Connection, phase: Phase, now: number): void {
    if (phase === conn.phase || !this.#open.has(conn)) return;
    this.#phases.get(conn.phase)!.delete(conn);
    this.#phases.get(phase)!.add(conn);
    conn.phase = phase;
    conn.since = now;
    if (phase === "idle") conn.idleBytes = conn.raw.bytesRead;
  }

  #refresh(conn: Connection, now: number): void {
    let phase: Phase = conn.served ? "idle" : "headers";
    if (conn.calls.size > 0) phase = conn.bodiesDone > 0 ? "busy" : "body";
    this.#setPhase(conn, phase, now);
  }

  /**
   * Makes room for a new connection by closing the one that has waited
   * longest on its client: first still sending its headers (a slowloris
   * flood is this), then idle, then still sending a request body. A
   * connection the server is answering is never shed.
   */
  #shedOne(): boolean {
    for (const phase of ["headers", "idle", "body"] as const) {
      for (const conn of this.#phases.get(phase)!) {
        if (phase === "body" && this.#bodiesArrived(conn)) continue;
        this.#counts.shed++;
        this.#destroy(conn);
        return true;
      }
    }
    return false;
  }

  /** Bodies nobody has read yet may be complete all the same; the phase catches up here. */
  #bodiesArrived(conn: Connection): boolean {
    let arrived = false;
    for (const call of conn.calls) {
      if (!call.bodyDone && bodyComplete(call.req)) {
        markBodyDone(conn, call);
        arrived = true;
      }
    }
    // Moves the connection to "busy" (out of the set being walked, which a Set allows).
    if (arrived) this.#refresh(conn, Date.now());
    return arrived;
  }

  #sweep(): void {
    const now = Date.now();
    const { headerTimeoutMs, idleTimeoutMs } = this.limits;
    for (const conn of [...this.#open]) {
      if (conn.closing) continue;
      if (conn.phase === "headers") {
        if (headerTimeoutMs > 0 && now - conn.since >= headerTimeoutMs) this.#headerTimeout(conn);
      } else if (conn.phase === "idle") {
        // An HTTP/1.1 client that starts its next request has its header time from here.
        if (conn.protocol === "http1" && conn.raw.bytesRead !== conn.idleBytes) this.#setPhase(conn, "headers", now);
        else if (idleTimeoutMs > 0 && now - conn.since >= idleTimeoutMs) this.#closeIdle(conn);
      } else {
        for (const call of [...conn.calls]) if (this.#open.has(conn)) this.#checkCall(conn, call, now);
      }
    }
    this.#report(now);
  }

  #checkCall(conn: Connection, call: Call, now: number): void {
    const { bodyTimeoutMs, writeTimeoutMs } = this.limits;
    if (!call.bodyDone) {
      if (bodyComplete(call.req)) {
        markBodyDone(conn, call);
        this.#refresh(conn, now);
      } else if (progressTimed.has(call.req)) {
        if (conn.raw.bytesRead !== call.bodyRead) {
          call.bodyRead = conn.raw.bytesRead;
          call.bodyProgressAt = now;
        } else if (bodyTimeoutMs > 0 && now - call.bodyProgressAt >= bodyTimeoutMs) {
          this.#counts.body_timeout++;
          return this.#cut(conn, call);
        }
      } else if (bodyTimeoutMs > 0 && now - call.started >= bodyTimeoutMs) {
        this.#counts.body_timeout++;
        return this.#cut(conn, call);
      }
    }
    // Not writableNeedDrain: that is false once a response has ended, however much of it is stuck.
    const pending = call.out.writableLength;
    if (pending === 0 || pending < call.pending) call.progressAt = now;
    call.pending = pending;
    if (pending > 0 && writeTimeoutMs > 0 && now - call.progressAt >= writeTimeoutMs) {
      this.#counts.write_timeout++;
      this.#cut(conn, call);
    }
  }

  /** Ends one call: an HTTP/2 stream is reset, an HTTP/1.1 connection (which carries only that call) is closed. */
  #cut(conn: Connection, call: Call): void {
    removeCall(conn, call);
    if ("stream" in call.req) {
      call.req.stream.close(http2.constants.NGHTTP2_CANCEL);
      this.#refresh(conn, Date.now());
    } else {
      this.#destroy(conn);
    }
  }

  #headerTimeout(conn: Connection): void {
    this.#counts.header_timeout++;
    if (conn.protocol !== "http1") return this.#destroy(conn);
    // Tell an HTTP/1.1 client why, as Node's own headersTimeout does.
    conn.closing = true;
    const timer = setTimeout(() => this.#destroy(conn), CLOSE_GRACE_MS).unref();
    conn.socket.end(REQUEST_TIMEOUT, () => {
      clearTimeout(timer);
      this.#destroy(conn);
    });
  }

  #closeIdle(conn: Connection): void {
    if (conn.session === undefined) return this.#destroy(conn);
    // GOAWAY lets an HTTP/2 client open its next call elsewhere without an error.
    conn.closing = true;
    conn.session.close();
    setTimeout(() => this.#destroy(conn), CLOSE_GRACE_MS).unref();
  }

  /** One line every so often, not one per connection: a flood must not become a flood of logs. */
  #report(now: number): void {
    if (now - this.#reportedAt < REPORT_EVERY_MS) return;
    this.#reportedAt = now;
    const counts = this.#counts;
    if (Object.values(counts).every((n) => n === 0)) return;
    this.#counts = { shed: 0, refused: 0, header_timeout: 0, body_timeout: 0, write_timeout: 0 };
    this.#logger?.warn({ ...counts, open: this.#open.size, max_connections: this.limits.maxConnections }, "closed slow or surplus connections");
  }
}
