// A2A's HTTP+JSON/REST binding (specification section 11) under /a2a/rest,
// onto any A2AService implementation: the routes of rest-routes.ts, each
// also under a leading /{tenant} segment, bodies and answers as ProtoJSON
// (application/a2a+json; application/json is accepted), streams as
// Server-Sent Events whose every `data` is a bare StreamResponse, and
// errors as google.rpc.Status JSON ({"error": {code, status, message,
// details}}) with the HTTP statuses of section 5.4: 404 for TaskNotFound,
// 500 for InvalidAgentResponse, 400 for the other A2A errors. A stream that
// fails after its first event ends with an `error` event carrying the same
// Status. Unknown paths are 404, a known path with another verb 405.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { StreamResponseSchema } from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { HttpRequest, HttpResponse } from "../server/http-reply.js";
import { startSse } from "../server/sse.js";
import { codeName, publicError, type PublicError } from "./binding-errors.js";
import { a2aError, isA2ASpecific } from "./errors.js";
import {
  BodyTooLarge,
  callContext,
  callStream,
  callUnary,
  closeIfBodyUnread,
  isJsonContentType,
  parseRequest,
  readBody,
  requestHeaders,
  responseHeadersOf,
  responseJson,
  untilAborted,
  type A2ABindingOptions,
  type CallContext,
} from "./http-call.js";
import { bodyJson, callOf, matchRoute, queryJson, verbsOf, type RouteCall, type RouteMatch } from "./rest-routes.js";
import { streamEventIdOf } from "./stream-event-id.js";
import { versionError } from "./version.js";

export const A2A_REST_PATH = "/a2a/rest";
/** The HandlerContext's protocolName for calls that came by this binding. */
export const REST_PROTOCOL = "http+json";
export const A2A_JSON_CONTENT_TYPE = "application/a2a+json";

/** The HTTP status of an error (section 5.4 for the A2A errors, the gRPC code's otherwise). */
export function httpStatusOf(error: PublicError): number {
  if (error.kind === "TaskNotFound") return 404;
  if (error.kind === "InvalidAgentResponse" || error.kind === "Internal") return 500;
  if (error.kind !== undefined && isA2ASpecific(error.kind)) return 400;
  return codeToHttpStatus(error.code);
}

/** The google.rpc.Status JSON of an error. */
export function statusJson(error: PublicError, httpStatus = httpStatusOf(error)): JsonObject {
  const status: JsonObject = { code: httpStatus, status: codeName(error.code), message: error.message };
  if (error.details.length > 0) status.details = error.details;
  return { error: status };
}

/**
 * The media type of an answer: application/a2a+json, as section 11.1 says
 * answers SHOULD be, unless the client's Accept names application/json and
 * not application/a2a+json (the same bytes either way).
 */
export function answerType(accept: string | undefined): string {
  if (accept === undefined) return A2A_JSON_CONTENT_TYPE;
  const types = accept.split(",").map((item) => item.split(";", 1)[0]!.trim().toLowerCase());
  return types.includes("application/json") && !types.includes(A2A_JSON_CONTENT_TYPE) ? "application/json" : A2A_JSON_CONTENT_TYPE;
}

function reply(res: HttpResponse, status: number, body: JsonValue, headers: Record<string, string> = {}): void {
  const bytes = Buffer.from(JSON.stringify(body));
  const accept = (res as { req?: HttpRequest }).req?.headers.accept;
  res.writeHead(status, { ...headers, "Content-Type": answerType(accept), Vary: "Accept", "Content-Length": String(bytes.byteLength), "Cache-Control": "no-store" });
  res.end(bytes);
}

/** A refusal of the binding's own (an unknown path, a wrong verb, a body it cannot take): a Status without A2A details. */
function plainRefusal(res: HttpResponse, httpStatus: number, code: Code, message: string, headers: Record<string, string> = {}): void {
  reply(res, httpStatus, { error: { code: httpStatus, status: codeName(code), message } }, headers);
}

function replyError(res: HttpResponse, error: PublicError, headers: Record<string, string>): void {
  const status = httpStatusOf(error);
  const extra: Record<string, string> = { ...headers };
  if (status === 401) extra["WWW-Authenticate"] = 'Bearer realm="a2a"';
  if (error.retryAfterSeconds !== undefined) extra["Retry-After"] = String(error.retryAfterSeconds);
  reply(res, status, statusJson(error, status), extra);
}

interface Exchange {
  req: HttpRequest;
  res: HttpResponse;
  options: A2ABindingOptions;
  call: CallContext;
}

function shown(exchange: Exchange, error: unknown, method: string): PublicError {
  const view = publicError(error);
  if (view.hidden) exchange.options.logger.error({ err: error, method, binding: REST_PROTOCOL }, "A2A call failed");
  return view;
}

/** The request message's JSON: the body (POST) or the query, with the path's fields over it. */
async function requestJson(exchange: Exchange, match: RouteMatch, call: RouteCall, url: URL): Promise<JsonObject> {
  const base = call.body ? bodyJson(await readBody(exchange.req, exchange.options.maxBodyBytes)) : queryJson(call.method.input, url.searchParams);
  return { ...base, ...match.fields };
}

async function serveUnary(exchange: Exchange, call: RouteCall, json: JsonObject): Promise<void> {
  const { res, options } = exchange;
  const result = await callUnary(options.service, call.method, parseRequest(call.method.input, json), exchange.call.ctx);
  exchange.call.outcome();
  reply(res, 200, responseJson(call.method.output, result), responseHeadersOf(exchange.call.ctx));
}

async function serveStream(exchange: Exchange, call: RouteCall, json: JsonObject): Promise<void> {
  const { res, options } = exchange;
  const { ctx } = exchange.call;
  const events = callStream(options.service, call.method, parseRequest(call.method.input, json), ctx);
  // A refusal before the first event (an unknown task, a terminal one) is a plain error answer, not a stream.
  let next = await untilAborted(events.next(), ctx.signal).catch((error: unknown) => {
    void events.return?.(undefined)?.catch(() => undefined);
    throw error;
  });
  const stream = startSse(res, { heartbeatMs: options.sseHeartbeatMs, headers: responseHeadersOf(ctx) });
  try {
    for (; next.done !== true; next = await untilAborted(events.next(), ctx.signal)) {
      await stream.send({ id: streamEventIdOf(next.value), data: JSON.stringify(responseJson(StreamResponseSchema, next.value)) });
    }
    exchange.call.outcome();
  } catch (error) {
    const view = shown(exchange, error, call.method.name);
    exchange.call.outcome(view);
    await stream.send({ event: "error", data: JSON.stringify(statusJson(view)) });
  } finally {
    void events.return?.(undefined)?.catch(() => undefined);
    stream.end();
  }
}

async function serve(req: HttpRequest, res: HttpResponse, options: A2ABindingOptions): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  // The path as sent (URL would resolve dot segments and re-encode): its segments are decoded one by one.
  const path = (req.url ?? "").split("?", 1)[0]!;
  const match = matchRoute(path.slice(A2A_REST_PATH.length));
  if (match === undefined) return plainRefusal(res, 404, Code.NotFound, `no A2A REST route is ${req.method} ${path.slice(0, 200)}`);
  const call = callOf(match, req.method ?? "");
  if (call === undefined) {
    const allowed = verbsOf(match).join(", ");
    return plainRefusal(res, 405, Code.Unimplemented, `${path.slice(0, 200)} answers ${allowed}`, { Allow: allowed });
  }
  if (call.body && !isJsonContentType(req.headers["content-type"])) {
    closeIfBodyUnread(req, res);
    // HTTP's own status for a body of a type not taken, with the A2A error that names it.
    const refusal = publicError(a2aError("ContentTypeNotSupported", `the body must be ProtoJSON (Content-Type: ${A2A_JSON_CONTENT_TYPE} or application/json)`));
    return reply(res, 415, statusJson(refusal, 415));
  }
  const headers = requestHeaders(req);
  const exchange: Exchange = { req, res, options, call: callContext(req, res, call.method, REST_PROTOCOL, options.draining, headers) };
  try {
    const refused = versionError(headers, url.searchParams);
    if (refused !== undefined) throw refused;
    const json = await requestJson(exchange, match, call, url);
    if (call.method.methodKind === "server_streaming") await serveStream(exchange, call, json);
    else await serveUnary(exchange, call, json);
  } catch (error) {
    if (error instanceof BodyTooLarge) {
      closeIfBodyUnread(req, res);
      return plainRefusal(res, 413, Code.ResourceExhausted, error.message);
    }
    if (res.headersSent || res.destroyed) return;
    closeIfBodyUnread(req, res);
    const view = shown(exchange, error, call.method.name);
    exchange.call.outcome(view);
    replyError(res, view, responseHeadersOf(exchange.call.ctx));
  } finally {
    exchange.call.release();
  }
}

/** The REST handler for every path under /a2a/rest. */
export function restHandler(options: A2ABindingOptions): (req: HttpRequest, res: HttpResponse) => void {
  return (req, res) => {
    serve(req, res, options).catch((error: unknown) => {
      options.logger.error({ err: error, binding: REST_PROTOCOL }, "A2A REST request failed");
      if (!res.headersSent) plainRefusal(res, 500, Code.Internal, "internal error");
      else res.end();
    });
  };
}
