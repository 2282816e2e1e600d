// What the short call paths share (unary.ts, server-stream.ts): the entry
// that takes a request or hands it over and reads its one message
// (shortEntry), the request's headers both ways, a call's signal without
// connect-es's per-call abort, the HandlerContext that connect-es would build
// for the call, and gRPC's trailers.
import type { IncomingHttpHeaders } from "node:http";
import { Code, ConnectError, type ContextKey, type ContextValues, type HandlerContext, type MethodImplSpec } from "@connectrpc/connect";
import type { UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { RequestHandler } from "./listener.js";
import { callAbortKey } from "./call-abort.js";
import { callStatusKey, refusalOf, type CallStatus } from "./call-status.js";
import { asConnectError, shapeError } from "./error-shape.js";
import { onAbort, type Abortable } from "../abort.js";

export type NodeRequest = Parameters<RequestHandler>[0];
export type NodeResponse = Parameters<RequestHandler>[1];

/** The router's options, as connect-es completes them (validateUniversalHandlerOptions). */
export type ShortOptions = UniversalHandlerOptions;

/** Hands a request to the standard path, with the body bytes a short path already read (and the rest still unread). */
export type HandOver = (alreadyRead: Uint8Array[]) => void;

/** A short path for one method: answers the request, or hands it over. */
export type ShortCall = (req: NodeRequest, res: NodeResponse, handOver: HandOver) => void;

/** How a request travels: gRPC (always HTTP/2 here) or Connect, binary or JSON. */
export interface Wire {
  grpc: boolean;
  binary: boolean;
}

export const identityEncoding = (encoding: string | string[] | undefined) => encoding === undefined || encoding === "identity";

/** The request headers as a Headers object, as connect-node builds them (HTTP/2 pseudo-headers left out). */
export function webHeaders(headers: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const key in headers) {
    if (key.startsWith(":")) continue;
    const value = headers[key];
    if (typeof value === "string") out.append(key, value);
    else if (Array.isArray(value)) for (const item of value) out.append(key, item);
  }
  return out;
}

export function nodeHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, key) => {
    out[key] = value;
  });
  return out;
}

/**
 * Reads the whole body, up to `limit` bytes. Past the limit it stops
 * reading, pauses the request and reports `over` with what it read, so the
 * standard path can read on and refuse it in its own words.
 */
export function readBody(req: NodeRequest, limit: number): Promise<{ chunks: Buffer[]; size: number; over: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.byteLength;
      if (size > limit) {
        stop();
        req.pause();
        resolve({ chunks, size, over: true });
      }
    };
    const onEnd = () => {
      stop();
      resolve({ chunks, size, over: false });
    };
    const onError = (error: Error) => {
      stop();
      reject(error);
    };
    const onClose = () => {
      stop();
      reject(new ConnectError("the client went away before its request ended", Code.Canceled));
    };
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onError);
    req.once("close", onClose);
  });
}

export const GRPC_FRAME_HEADER = 5;

/** One frame: the flags byte, the length, the data. */
export function frame(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(GRPC_FRAME_HEADER + data.byteLength);
  out[0] = flags;
  out.writeUInt32BE(data.byteLength, 1);
  out.set(data, GRPC_FRAME_HEADER);
  return out;
}

const sharedFrames = new WeakMap<Uint8Array, Buffer>();

/** The uncompressed frame of bytes many streams send (kept while the bytes are); nobody writes into it. */
export function sharedFrame(data: Uint8Array): Buffer {
  let out = sharedFrames.get(data);
  if (out === undefined) {
    out = frame(0, data);
    sharedFrames.set(data, out);
  }
  return out;
}

/** The message of a gRPC body that is exactly one uncompressed frame; undefined otherwise. */
export function singleFrame(body: Buffer): Buffer | undefined {
  if (body.byteLength < GRPC_FRAME_HEADER || body[0] !== 0) return undefined;
  return body.readUInt32BE(1) === body.byteLength - GRPC_FRAME_HEADER ? body.subarray(GRPC_FRAME_HEADER) : undefined;
}

/**
 * A call's signal: aborted by its deadline, by the server shutting down, or
 * by the client going away — never when it simply ends. The AbortSignal is
 * made when something first reads it: Node gives every AbortSignal three
 * hidden classes of its own, made in the old generation, and a waited Send
 * listens through callAbortKey instead.
 */
export class CallSignal implements Abortable {
  private controller: AbortController | undefined;
  private abortedFor: { reason: unknown } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly stopListening: () => void;
  /** Told when the call aborts (see callAbortKey): usually none, at most a few. */
  private listeners: Array<() => void> | undefined;
  private readonly closed = () => {
    // Closed before the answer ended (an HTTP/2 stream reset by its client reads as writableFinished).
    if (!this.res.writableEnded) this.abort(new ConnectError("the client went away", Code.Canceled));
  };

  constructor(
    shutdown: AbortSignal | undefined,
    timeoutMs: number | undefined,
    private readonly res: NodeResponse,
  ) {
    if (timeoutMs !== undefined) this.timer = setTimeout(() => this.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
    this.stopListening = shutdown === undefined ? () => undefined : onAbort(shutdown, () => this.abort(shutdown.reason));
    res.once("close", this.closed);
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedFor !== undefined) this.controller.abort(this.abortedFor.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedFor !== undefined;
  }

  /** Why the call was aborted (undefined while it was not). */
  get reason(): unknown {
    return this.abortedFor?.reason;
  }

  listen(listener: () => void): () => void {
    const listeners = (this.listeners ??= []);
    listeners.push(listener);
    return () => {
      const at = listeners.indexOf(listener);
      if (at >= 0) listeners.splice(at, 1);
    };
  }

  private abort(reason: unknown): void {
    if (this.abortedFor !== undefined) return;
    this.abortedFor = { reason };
    this.controller?.abort(reason);
    const told = this.listeners;
    this.listeners = undefined;
    if (told !== undefined) for (const listener of told) listener();
  }

  /**
   * The call is over: nothing is aborted, the timer and listeners go. The
   * response's close listener goes too: under load Node keeps a closed HTTP/2
   * stream, and what hangs on it, until a full GC (see connection-limits.ts),
   * and this call's signal and what listens to it would be promoted with it.
   */
  release(): void {
    clearTimeout(this.timer);
    this.stopListening();
    this.listeners = undefined;
    this.res.off("close", this.closed);
  }
}

export function headerValue(value: string | string[] | undefined): string | null {
  return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
}

/**
 * connect-es's ContextValues (createContextValues), with its methods on a
 * prototype: the object literal it returns makes three new functions for
 * every call, which an open Watch holds for as long as it lasts.
 */
class CallValues implements ContextValues {
  get<T>(key: ContextKey<T>): T {
    return key.id in this ? ((this as Record<symbol, unknown>)[key.id] as T) : key.defaultValue;
  }

  set<T>(key: ContextKey<T>, value: T): this {
    (this as Record<symbol, unknown>)[key.id] = value;
    return this;
  }

  delete(key: ContextKey<unknown>): this {
    delete (this as Record<symbol, unknown>)[key.id];
    return this;
  }
}

/**
 * The context connect-es gives a handler, for a call answered on a short
 * path; its signal is the call's, made when first read (see CallSignal).
 */
export class ShortCallContext implements HandlerContext {
  readonly method: MethodImplSpec["method"];
  readonly service: MethodImplSpec["method"]["parent"];
  readonly requestMethod = "POST";
  readonly requestHeader: Headers;
  readonly responseHeader = new Headers();
  readonly responseTrailer = new Headers();
  readonly values: ContextValues;
  readonly url: string;
  readonly timeoutMs: () => number | undefined;

  constructor(
    spec: MethodImplSpec,
    req: NodeRequest,
    readonly protocolName: string,
    private readonly call: CallSignal,
    timeoutMs: number | undefined,
    status: CallStatus,
  ) {
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    const authority = req.headers[":authority"] ?? req.headers.host ?? "localhost";
    const scheme = "encrypted" in req.socket && req.socket.encrypted ? "https" : "http";
    this.method = spec.method;
    this.service = spec.method.parent;
    this.timeoutMs = () => (deadline === undefined ? undefined : deadline - Date.now());
    this.requestHeader = webHeaders(req.headers);
    this.values = new CallValues().set(callStatusKey, status).set(callAbortKey, call);
    this.url = `${scheme}://${authority}${req.url ?? ""}`;
  }

  get signal(): AbortSignal {
    return this.call.signal;
  }
}

/** Answers one call whose one request message has been read. */
export type AnswerCall = (req: NodeRequest, res: NodeResponse, wire: Wire, message: Buffer, timeoutMs: number | undefined) => Promise<void>;

/**
 * A short path's entry: a request `wireOf` takes, with a deadline header that
 * parses and a body of one message within the read limit (in one
 * uncompressed frame when `framed`), is read and answered; anything else goes
 * the standard way, with whatever was read handed over.
 */
export function shortEntry(options: ShortOptions, wireOf: (req: NodeRequest) => Wire | undefined, framed: (wire: Wire) => boolean, answer: AnswerCall): ShortCall {
  return (req, res, handOver) => {
    const wire = wireOf(req);
    if (wire === undefined || (!wire.grpc && options.requireConnectProtocolHeader)) return handOver([]);
    const timeout = wire.grpc
      ? parseGrpcTimeout(headerValue(req.headers["grpc-timeout"]), options.maxTimeoutMs)
      : parseConnectTimeout(headerValue(req.headers["connect-timeout-ms"]), options.maxTimeoutMs);
    const inFrame = framed(wire);
    const limit = options.readMaxBytes + (inFrame ? GRPC_FRAME_HEADER : 0);
    const declared = Number(req.headers["content-length"] ?? 0);
    if (timeout.error !== undefined || !(declared <= limit)) return handOver([]);
    readBody(req, limit)
      .then(
        ({ chunks, size, over }) => {
          if (over) return handOver(chunks);
          const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
          const message = inFrame ? singleFrame(body) : body;
          if (message === undefined) return handOver([body]);
          return answer(req, res, wire, message, timeout.timeoutMs);
        },
        () => {
          // The request broke off while being read: nobody is left to answer.
          if (!res.destroyed) res.destroy();
        },
      )
      .catch((error: unknown) => {
        // A write that failed: the connection is gone.
        if (!res.destroyed) res.destroy(error instanceof Error ? error : undefined);
      });
  };
}

/** A success with no trailers of the handler's: what connect-es writes then (HTTP/2 copies it into the stream). */
const OK_TRAILERS: Readonly<Record<string, string>> = Object.freeze({ "grpc-status": "0" });

function isEmpty(headers: Headers): boolean {
  for (const _ of headers.keys()) return false;
  return true;
}

/** gRPC's trailers: the handler's, and the call's status. */
export function addGrpcTrailers(res: NodeResponse, context: HandlerContext, failure: ConnectError | undefined): void {
  const target = res as unknown as { addTrailers(headers: Readonly<Record<string, string>>): void };
  // The common case costs no Headers object: ending 10,000 Watch streams built 10,000 of them.
  if (failure === undefined && isEmpty(context.responseTrailer)) return target.addTrailers(OK_TRAILERS);
  const trailer = new Headers(context.responseTrailer);
  setTrailerStatus(trailer, failure);
  target.addTrailers(nodeHeaders(trailer));
}

/** A call's failure as clients see it: the interceptors shaped what the method threw; errors reading the request are shaped here. */
export function failureOf(error: unknown): ConnectError {
  return shapeError(asConnectError(error) ?? new ConnectError("internal error", Code.Internal, undefined, undefined, error));
}

/** The call's final status, for the request log and the metrics. */
export function recordOutcome(status: CallStatus, failure: ConnectError | undefined): void {
  status.code = failure === undefined ? null : failure.code;
  if (failure !== undefined) {
    status.message = failure.rawMessage;
    status.refusal = refusalOf(failure);
  }
}
