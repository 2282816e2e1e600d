// What the two JSON bindings (JSON-RPC and REST) share: reading a request
// body within the size limit, ProtoJSON in and out, and calling a method of
// the A2A service with a HandlerContext made from the HTTP request (its
// headers, an AbortSignal that fires when the client goes away or the
// server drains, the connect-timeout-ms deadline if one is given).
import { create, createRegistry, fromJson, isMessage, toJson, type DescMessage, type DescMethod, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, createHandlerContext, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { A2AService, file_lf_a2a_v1_a2a } from "../../gen/lf/a2a/v1/a2a_pb.js";
import { onAbort } from "../abort.js";
import type { Logger } from "../log.js";
import { callStatusKey } from "../server/call-status.js";
import type { HttpRequest, HttpResponse } from "../server/http-reply.js";
import { callStatusFor } from "../server/request-log.js";
import type { PublicError } from "./binding-errors.js";
import { a2aError } from "./errors.js";

export type A2AServiceImpl = ServiceImpl<typeof A2AService>;

/** What both JSON bindings are given. */
export interface A2ABindingOptions {
  service: A2AServiceImpl;
  /** The largest request body taken, in bytes (the server's message limit). */
  maxBodyBytes: number;
  /** Aborts when the server drains: open streams end. */
  draining: AbortSignal;
  logger: Logger;
  /** A comment line this often on an idle SSE stream (default 15 s). */
  sseHeartbeatMs?: number;
}

const registry = createRegistry(file_lf_a2a_v1_a2a);
/** The largest deadline a timer holds (deadline.ts says why). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A request body over the limit. */
export class BodyTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`the request body exceeds ${limit} bytes`);
  }
}

/** The request body as text; BodyTooLarge before reading a body whose declared length is over the limit, or once it passes it. */
export async function readBody(req: HttpRequest, maxBytes: number): Promise<string> {
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) throw new BodyTooLarge(maxBytes);
  const chunks: Buffer[] = [];
  let size = 0;
  // The rest of a refused body is left flowing: the listener drains it once the answer is out.
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > maxBytes) throw new BodyTooLarge(maxBytes);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString("utf8");
}

/** Whether a Content-Type names JSON (application/json, application/a2a+json); an absent one passes. */
export function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined || value.trim() === "") return true;
  const type = value.split(";", 1)[0]!.trim().toLowerCase();
  return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"));
}

/** A refused request's connection cannot carry another HTTP/1.1 request while its body is unread. */
export function closeIfBodyUnread(req: HttpRequest, res: HttpResponse): void {
  if (req.httpVersionMajor === 1 && !req.complete && !res.headersSent) res.setHeader("Connection", "close");
}

/** Messages whose ProtoJSON is not an object of their fields (Struct, Value, Timestamp...): left as they are. */
const SPECIAL_JSON = /^google\.protobuf\./;

/**
 * The JSON without the object keys the schema does not know, at any depth.
 * protobuf-es's ignoreUnknownFields would also drop enum names it does not
 * know, turning a bad filter (status: "working") into no filter at all;
 * stripping only unknown keys, then parsing strictly, refuses those.
 */
function withoutUnknownFields(schema: DescMessage, json: JsonValue): JsonValue {
  if (SPECIAL_JSON.test(schema.typeName) || typeof json !== "object" || json === null || Array.isArray(json)) return json;
  const known: Record<string, JsonValue> = {};
  for (const [key, value] of Object.entries(json)) {
    const field = schema.fields.find((f) => f.jsonName === key || f.name === key);
    if (field === undefined) continue;
    if (field.fieldKind === "message") known[key] = withoutUnknownFields(field.message, value);
    else if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(value)) known[key] = value.map((item) => withoutUnknownFields(field.message, item));
    else if (field.fieldKind === "map" && field.mapKind === "message" && typeof value === "object" && value !== null && !Array.isArray(value)) {
      known[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutUnknownFields(field.message, v)]));
    } else known[key] = value;
  }
  return known;
}

/** The request message from its ProtoJSON (unknown fields ignored, as the specification asks); InvalidParams when it does not parse. */
export function parseRequest<D extends DescMessage>(schema: D, json: JsonValue): MessageShape<D> {
  try {
    return fromJson(schema, withoutUnknownFields(schema, json), { registry });
  } catch (error) {
    throw a2aError("InvalidParams", `the ${schema.name} is not valid: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** A response message (or its init shape, which service methods may return) as ProtoJSON. */
export function responseJson(schema: DescMessage, value: unknown): JsonValue {
  const message = isMessage(value, schema) ? value : create(schema, value as never);
  return toJson(schema, message, { registry });
}

/** The request's headers as a Headers (HTTP/2 pseudo-headers left out). */
export function requestHeaders(req: HttpRequest): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith(":") || value === undefined) continue; // HTTP/2 pseudo-headers
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.set(name, value);
  }
  return headers;
}

function timeoutOf(headers: Headers): number | undefined {
  const raw = headers.get("connect-timeout-ms");
  if (raw === null || !/^\d{1,10}$/.test(raw)) return undefined;
  return Math.min(Number(raw), MAX_TIMER_MS);
}

export interface CallContext {
  ctx: ReturnType<typeof createHandlerContext>;
  /** Notes how the call ended (undefined: it succeeded), for the request log. */
  outcome(error?: PublicError): void;
  /** Stops listening to the request and the drain signal; call when the call is over. */
  release(): void;
}

/** Why a call's signal aborts when the server drains: the client should come back (to another instance, or after the restart). */
const DRAINING = () => new ConnectError("the server is shutting down: call again (a stream resumes with Last-Event-ID)", Code.Unavailable);

/** A HandlerContext for one call of `method`, tied to the HTTP request; its outcome is noted for the request log. */
export function callContext(req: HttpRequest, res: HttpResponse, method: DescMethod, protocolName: string, draining: AbortSignal, requestHeader = requestHeaders(req)): CallContext {
  const controller = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) controller.abort(new ConnectError("the client went away", Code.Canceled));
  };
  res.once("close", onClose);
  const stopDraining = onAbort(draining, () => controller.abort(DRAINING()));
  const host = requestHeader.get("host") ?? (req.headers[":authority"] as string | undefined) ?? "localhost";
  const status = callStatusFor(req);
  const ctx = createHandlerContext({
    service: A2AService,
    method,
    protocolName,
    requestMethod: req.method ?? "POST",
    url: `http://${host}${req.url ?? "/"}`,
    timeoutMs: timeoutOf(requestHeader),
    requestSignal: controller.signal,
    requestHeader,
    contextValues: createContextValues().set(callStatusKey, status),
  });
  return {
    ctx,
    outcome(error) {
      status.code = error === undefined ? null : error.code;
      status.message = error?.message;
    },
    release() {
      res.off("close", onClose);
      stopDraining();
      ctx.abort();
    },
  };
}

type AnyUnary = (request: unknown, ctx: HandlerContext) => Promise<unknown> | unknown;
type AnyStream = (request: unknown, ctx: HandlerContext) => AsyncIterable<unknown>;

/** Settles with `work`, or rejects once `signal` aborts (the deadline passed, the client left), whichever comes first. */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(ConnectError.from(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const stop = onAbort(signal, () => reject(ConnectError.from(signal.reason)));
    work.then(
      (value) => (stop(), resolve(value)),
      (error: unknown) => (stop(), reject(error)),
    );
  });
}

/** Calls a unary method of the service. */
export async function callUnary(service: A2AServiceImpl, method: DescMethod, request: unknown, ctx: HandlerContext): Promise<unknown> {
  const impl = (service as unknown as Record<string, AnyUnary | undefined>)[method.localName];
  if (impl === undefined) throw a2aError("UnsupportedOperation", `${method.name} is not served here`);
  return untilAborted(Promise.resolve(impl.call(service, request, ctx)), ctx.signal);
}

/** Calls a server-streaming method of the service. */
export function callStream(service: A2AServiceImpl, method: DescMethod, request: unknown, ctx: HandlerContext): AsyncIterator<unknown> {
  const impl = (service as unknown as Record<string, AnyStream | undefined>)[method.localName];
  if (impl === undefined) throw a2aError("UnsupportedOperation", `${method.name} is not served here`);
  return impl.call(service, request, ctx)[Symbol.asyncIterator]();
}

/** The context's response headers (A2A-Extensions, say) as the HTTP response's. */
export function responseHeadersOf(ctx: HandlerContext): Record<string, string> {
  const headers: Record<string, string> = {};
  ctx.responseHeader.forEach((value, name) => (headers[name] = value));
  return headers;
}

/** The method of A2AService with this RPC name (SendMessage), if there is one. */
export function methodNamed(name: string): DescMethod | undefined {
  return methodsByName.get(name);
}
const methodsByName = new Map(A2AService.methods.map((method) => [method.name, method]));
