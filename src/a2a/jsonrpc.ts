// A2A's JSON-RPC 2.0 binding (specification section 9) at POST /a2a/jsonrpc,
// onto any A2AService implementation. The method is the RPC's name
// (SendMessage), params its request message as ProtoJSON, the result its
// response message as ProtoJSON; SendStreamingMessage and SubscribeToTask
// answer with Server-Sent Events whose every `data` is a whole JSON-RPC
// response carrying the request's id. Errors carry the codes of section
// 5.4 and, in `data`, google.rpc.ErrorInfo (and BadRequest) objects.
//
// JSON-RPC errors travel with HTTP 200, except what HTTP itself is about: a
// wrong HTTP method (405), a body that is not JSON (415, ContentTypeNotSupported) or too large (413),
// and a caller without valid credentials (401, with a Bearer challenge).
// A notification (a request without an id) is run and answered 204 with no
// body, as JSON-RPC forbids a reply; a streaming method sent as a
// notification is not run, having nowhere to stream to. Batches (JSON-RPC
// 2.0 section 6) of up to MAX_BATCH unary requests are run one after the
// other and answered with an array; a streaming method in a batch is an
// invalid request, since its answer is a stream of its own.
import type { DescMethod, JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { StreamResponseSchema } from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { Logger } from "../log.js";
import type { HttpRequest, HttpResponse } from "../server/http-reply.js";
import { startSse } from "../server/sse.js";
import { publicError, type PublicError } from "./binding-errors.js";
import { a2aError, type A2AErrorKind } from "./errors.js";
import {
  BodyTooLarge,
  callContext,
  callStream,
  callUnary,
  closeIfBodyUnread,
  isJsonContentType,
  methodNamed,
  parseRequest,
  readBody,
  requestHeaders,
  responseHeadersOf,
  responseJson,
  untilAborted,
  type A2ABindingOptions,
} from "./http-call.js";
import { streamEventIdOf } from "./stream-event-id.js";
import { versionError } from "./version.js";

export const A2A_JSONRPC_PATH = "/a2a/jsonrpc";
/** The HandlerContext's protocolName for calls that came by this binding. */
export const JSONRPC_PROTOCOL = "jsonrpc";
/** The most requests one batch may hold. */
export const MAX_BATCH = 32;

type Id = string | number | null;
interface RpcRequest {
  id: Id;
  notification: boolean;
  method: string;
  params: unknown;
}

/** Section 5.4's codes, and JSON-RPC's own for the standard errors. */
const KIND_CODES: Partial<Record<A2AErrorKind, number>> = {
  TaskNotFound: -32001,
  TaskNotCancelable: -32002,
  PushNotificationNotSupported: -32003,
  UnsupportedOperation: -32004,
  ContentTypeNotSupported: -32005,
  InvalidAgentResponse: -32006,
  ExtendedAgentCardNotConfigured: -32007,
  ExtensionSupportRequired: -32008,
  VersionNotSupported: -32009,
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  Internal: -32603,
};
/** JSON-RPC's implementation-defined server error, outside the range A2A keeps for its own: authentication, limits, availability. */
export const SERVER_ERROR_CODE = -32000;

/** The JSON-RPC error code of an error. */
export function jsonRpcCodeOf(error: PublicError): number {
  const byKind = error.kind === undefined ? undefined : KIND_CODES[error.kind];
  if (byKind !== undefined) return byKind;
  if (error.code === Code.InvalidArgument || error.code === Code.OutOfRange) return -32602;
  if (error.code === Code.Unimplemented) return -32601;
  return SERVER_ERROR_CODE;
}

function errorResponse(id: Id, error: PublicError): JsonObject {
  const body: JsonObject = { code: jsonRpcCodeOf(error), message: error.message };
  if (error.details.length > 0) body.data = error.details;
  return { jsonrpc: "2.0", id, error: body };
}

function refusal(kind: A2AErrorKind, message: string): PublicError {
  return publicError(a2aError(kind, message));
}

function reply(res: HttpResponse, status: number, body: JsonValue, headers: Record<string, string> = {}): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { ...headers, "Content-Type": "application/json", "Content-Length": String(bytes.byteLength), "Cache-Control": "no-store" });
  res.end(bytes);
}

/** The error as the caller sees it; one the caller may not read is logged here. */
function shown(error: unknown, method: string, logger: Logger): PublicError {
  const view = publicError(error);
  if (view.hidden) logger.error({ err: error, method, binding: JSONRPC_PROTOCOL }, "A2A call failed");
  return view;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** A request object checked against JSON-RPC 2.0 section 4, or the error response it earns. */
function validate(value: unknown): RpcRequest | JsonObject {
  if (!isPlainObject(value)) return errorResponse(null, refusal("InvalidRequest", "a JSON-RPC request is an object with jsonrpc, method, params and id"));
  const hasId = "id" in value;
  const id = value.id;
  if (hasId && id !== null && typeof id !== "string" && typeof id !== "number") {
    return errorResponse(null, refusal("InvalidRequest", "id must be a string, a number or null"));
  }
  const echo = hasId ? (id as Id) : null;
  if (value.jsonrpc !== "2.0") return errorResponse(echo, refusal("InvalidRequest", 'jsonrpc must be exactly "2.0"'));
  if (typeof value.method !== "string") return errorResponse(echo, refusal("InvalidRequest", "method must be a string: the A2A method's name, such as SendMessage"));
  return { id: echo, notification: !hasId, method: value.method, params: value.params };
}

/** The params as the method's request message's JSON: absent means an empty request; anything but an object is refused. */
function paramsOf(request: RpcRequest): JsonValue {
  if (request.params === undefined) return {};
  if (!isPlainObject(request.params)) throw a2aError("InvalidParams", `params must be an object: the ${request.method} request message, by name`);
  return request.params as JsonValue;
}

interface Exchange {
  req: HttpRequest;
  res: HttpResponse;
  headers: Headers;
  options: A2ABindingOptions;
  /** Response headers the calls set (A2A-Extensions), for the HTTP answer. */
  responseHeaders: Record<string, string>;
  version: PublicError | undefined;
}

/** Runs one unary request: its response object (none for a notification), and the error it failed with. */
async function runUnary(exchange: Exchange, request: RpcRequest, method: DescMethod): Promise<{ answer?: JsonObject; error?: PublicError }> {
  const call = callContext(exchange.req, exchange.res, method, JSONRPC_PROTOCOL, exchange.options.draining, exchange.headers);
  try {
    const message = parseRequest(method.input, paramsOf(request));
    const result = await callUnary(exchange.options.service, method, message, call.ctx);
    call.outcome();
    return { answer: request.notification ? undefined : { jsonrpc: "2.0", id: request.id, result: responseJson(method.output, result) } };
  } catch (error) {
    const view = shown(error, method.name, exchange.options.logger);
    call.outcome(view);
    return { answer: request.notification ? undefined : errorResponse(request.id, view), error: view };
  } finally {
    Object.assign(exchange.responseHeaders, responseHeadersOf(call.ctx));
    call.release();
  }
}

/** The answer to one request of a batch (undefined for a notification). */
async function batchAnswer(exchange: Exchange, item: unknown): Promise<JsonObject | undefined> {
  const request = validate(item);
  if (!("method" in request && "notification" in request)) return request as JsonObject;
  const rpc = request as RpcRequest;
  const answer = (error: PublicError) => (rpc.notification ? undefined : errorResponse(rpc.id, error));
  if (exchange.version !== undefined) return answer(exchange.version);
  const method = methodNamed(rpc.method);
  if (method === undefined) return answer(refusal("MethodNotFound", `no A2A method is named ${JSON.stringify(rpc.method.slice(0, 64))}`));
  if (method.methodKind !== "unary") return answer(refusal("InvalidRequest", `${method.name} answers with a stream and cannot be part of a batch`));
  return (await runUnary(exchange, rpc, method)).answer;
}

async function serveBatch(exchange: Exchange, items: unknown[]): Promise<void> {
  const { res } = exchange;
  if (items.length === 0) return reply(res, 200, errorResponse(null, refusal("InvalidRequest", "an empty batch")));
  if (items.length > MAX_BATCH) return reply(res, 200, errorResponse(null, refusal("InvalidRequest", `a batch holds at most ${MAX_BATCH} requests`)));
  const answers: JsonObject[] = [];
  for (const item of items) {
    const answer = await batchAnswer(exchange, item);
    if (answer !== undefined) answers.push(answer);
  }
  if (answers.length === 0) return void noContent(res, exchange.responseHeaders);
  reply(res, 200, answers, exchange.responseHeaders);
}

function noContent(res: HttpResponse, headers: Record<string, string>): void {
  res.writeHead(204, headers);
  res.end();
}

/** A single request's error, with 401 and a challenge when the caller is not authenticated. */
function replyError(exchange: Exchange, id: Id, error: PublicError): void {
  const unauthenticated = error.code === Code.Unauthenticated;
  const headers: Record<string, string> = { ...exchange.responseHeaders };
  if (unauthenticated) headers["WWW-Authenticate"] = 'Bearer realm="a2a"';
  if (error.retryAfterSeconds !== undefined) headers["Retry-After"] = String(error.retryAfterSeconds);
  reply(exchange.res, unauthenticated ? 401 : 200, errorResponse(id, error), headers);
}

async function serveStream(exchange: Exchange, request: RpcRequest, method: DescMethod): Promise<void> {
  const { res, options } = exchange;
  if (request.notification) return noContent(res, {});
  const call = callContext(exchange.req, res, method, JSONRPC_PROTOCOL, options.draining, exchange.headers);
  let events: AsyncIterator<unknown> | undefined;
  let first: IteratorResult<unknown>;
  try {
    events = callStream(options.service, method, parseRequest(method.input, paramsOf(request)), call.ctx);
    // A refusal before the first event (an unknown task, a terminal one) is a plain JSON-RPC error, not a stream.
    first = await untilAborted(events.next(), call.ctx.signal);
  } catch (error) {
    void events?.return?.(undefined)?.catch(() => undefined);
    const view = shown(error, method.name, options.logger);
    call.outcome(view);
    call.release();
    if (!res.destroyed) replyError({ ...exchange, responseHeaders: responseHeadersOf(call.ctx) }, request.id, view);
    return;
  }
  const stream = startSse(res, { heartbeatMs: options.sseHeartbeatMs, headers: responseHeadersOf(call.ctx) });
  try {
    for (let next = first; next.done !== true; next = await untilAborted(events.next(), call.ctx.signal)) {
      const data = JSON.stringify({ jsonrpc: "2.0", id: request.id, result: responseJson(StreamResponseSchema, next.value) });
      await stream.send({ id: streamEventIdOf(next.value), data });
    }
    call.outcome();
  } catch (error) {
    // The stream failed, its deadline passed or the server drains: the last event says so (nobody reads it when the client has gone).
    const view = shown(error, method.name, options.logger);
    call.outcome(view);
    await stream.send({ data: JSON.stringify(errorResponse(request.id, view)) });
  } finally {
    void events.return?.(undefined)?.catch(() => undefined);
    stream.end();
    call.release();
  }
}

async function serve(req: HttpRequest, res: HttpResponse, options: A2ABindingOptions): Promise<void> {
  if (req.method !== "POST") {
    return reply(res, 405, errorResponse(null, refusal("InvalidRequest", `POST a JSON-RPC 2.0 request to ${A2A_JSONRPC_PATH}`)), { Allow: "POST" });
  }
  if (!isJsonContentType(req.headers["content-type"])) {
    closeIfBodyUnread(req, res);
    return reply(res, 415, errorResponse(null, refusal("ContentTypeNotSupported", "the request body must be JSON (Content-Type: application/json)")));
  }
  let text: string;
  try {
    text = await readBody(req, options.maxBodyBytes);
  } catch (error) {
    if (!(error instanceof BodyTooLarge)) throw error;
    closeIfBodyUnread(req, res);
    return reply(res, 413, errorResponse(null, refusal("InvalidRequest", error.message)));
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    return reply(res, 200, errorResponse(null, refusal("ParseError", `the body is not valid JSON: ${(error as Error).message}`)));
  }
  const headers = requestHeaders(req);
  const refused = versionError(headers, new URL(req.url ?? "/", "http://localhost").searchParams);
  const exchange: Exchange = { req, res, headers, options, responseHeaders: {}, version: refused === undefined ? undefined : publicError(refused) };
  if (Array.isArray(body)) return serveBatch(exchange, body);
  const request = validate(body);
  if (!("notification" in request && "method" in request)) return reply(res, 200, request);
  const rpc = request as RpcRequest;
  if (exchange.version !== undefined) return rpc.notification ? noContent(res, {}) : replyError(exchange, rpc.id, exchange.version);
  const method = methodNamed(rpc.method);
  if (method === undefined) {
    return rpc.notification ? noContent(res, {}) : replyError(exchange, rpc.id, refusal("MethodNotFound", `no A2A method is named ${JSON.stringify(rpc.method.slice(0, 64))}`));
  }
  if (method.methodKind === "server_streaming") return serveStream(exchange, rpc, method);
  const { answer, error } = await runUnary(exchange, rpc, method);
  if (answer === undefined) return noContent(res, exchange.responseHeaders);
  if (error !== undefined) return replyError(exchange, rpc.id, error);
  reply(res, 200, answer, exchange.responseHeaders);
}

/** The JSON-RPC handler for POST /a2a/jsonrpc. */
export function jsonRpcHandler(options: A2ABindingOptions): (req: HttpRequest, res: HttpResponse) => void {
  return (req, res) => {
    serve(req, res, options).catch((error: unknown) => {
      options.logger.error({ err: error, binding: JSONRPC_PROTOCOL }, "A2A JSON-RPC request failed");
      if (!res.headersSent) reply(res, 500, errorResponse(null, refusal("Internal", "internal error")));
      else res.end();
    });
  };
}
