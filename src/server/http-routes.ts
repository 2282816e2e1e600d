// The plain HTTP paths beside the RPCs: POST /upload, the SSE event stream
// GET /tasks/{task_id}/events, A2A's JSON-RPC (POST /a2a/jsonrpc) and REST
// (/a2a/rest/...) bindings, and the operator console; anything else 404, or
// the embedding server's own routes (fallback).
import { createHash } from "node:crypto";
import { A2A_JSONRPC_PATH, jsonRpcHandler } from "../a2a/jsonrpc.js";
import { A2A_REST_PATH, restHandler } from "../a2a/rest.js";
import type { A2AServiceImpl } from "../a2a/http-call.js";
import type { Agent } from "../agent/agent.js";
import { AGENT_CARD_PATH, JWKS_PATH } from "../a2a/card.js";
import type { A2AFace } from "../a2a/serve.js";
import type { Logger } from "../log.js";
import { CONSOLE_PATH, consoleHandler } from "./console.js";
import { eventsPathTaskId, eventStreamHandler } from "./event-stream.js";
import type { RequestHandler } from "./listener.js";
import { UPLOAD_PATH, uploadHandler } from "./upload.js";

export interface HttpRoutesOptions {
  /** Without an agent only the console is served. */
  agent?: Agent;
  /** Serves the A2A agent card and its JWK set. */
  a2a?: A2AFace;
  draining: AbortSignal;
  logger: Logger;
  /** The SSE comment heartbeat interval (default 15 s). */
  sseHeartbeatMs?: number;
  /** Answers every other path (an embedding server's own routes); default the console's 404. */
  fallback?: RequestHandler;
  /** The A2A service the JSON bindings call, and the largest request body they take. */
  a2aBindings?: { service: A2AServiceImpl; maxBodyBytes: number };
}

/** The A2A JSON bindings' paths: POST /a2a/jsonrpc and everything under /a2a/rest/; undefined without a service. */
function a2aRoutes(options: HttpRoutesOptions): ((req: Parameters<RequestHandler>[0], res: Parameters<RequestHandler>[1], path: string) => boolean) | undefined {
  if (options.a2aBindings === undefined) return undefined;
  const bindingOptions = { ...options.a2aBindings, draining: options.draining, logger: options.logger, sseHeartbeatMs: options.sseHeartbeatMs };
  const jsonRpc = jsonRpcHandler(bindingOptions);
  const rest = restHandler(bindingOptions);
  return (req, res, path) => {
    // The endpoint with a trailing slash too: clients that join a base URL with "/" post there.
    if (path === A2A_JSONRPC_PATH || path === `${A2A_JSONRPC_PATH}/`) jsonRpc(req, res);
    else if (path === A2A_REST_PATH || path.startsWith(`${A2A_REST_PATH}/`)) rest(req, res);
    else return false;
    return true;
  };
}

export function httpRoutes(options: HttpRoutesOptions): RequestHandler {
  const page = consoleHandler();
  const { fallback } = options;
  const consolePage: RequestHandler =
    fallback === undefined
      ? page
      : (req, res) => {
          const path = (req.url ?? "").split("?", 1)[0] ?? "";
          if (path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`)) page(req, res);
          else fallback(req, res);
        };
  const { agent } = options;
  const a2aJson = a2aRoutes(options);
  if (agent === undefined) {
    if (a2aJson === undefined) return consolePage;
    return (req, res) => {
      if (!a2aJson(req, res, (req.url ?? "").split("?", 1)[0] ?? "")) consolePage(req, res);
    };
  }
  const bearer = { audience: agent.identity.agentId, trust: agent.trust };
  const upload = uploadHandler({ uploads: agent.uploads, bearer, logger: options.logger });
  const events = eventStreamHandler({ agent, bearer, draining: options.draining, heartbeatMs: options.sseHeartbeatMs });
  return (req, res) => {
    const path = (req.url ?? "").split("?", 1)[0] ?? "";
    if (path === UPLOAD_PATH) return upload(req, res);
    if (a2aJson?.(req, res, path) === true) return;
    if (options.a2a !== undefined && (path === AGENT_CARD_PATH || path === JWKS_PATH)) return wellKnown(options.a2a, path, req, res, options.logger);
    const taskId = eventsPathTaskId(path);
    if (taskId !== undefined) return events(req, res, taskId);
    consolePage(req, res);
  };
}

/** When this process began serving its card (whole seconds, as HTTP dates have). */
const CARD_SERVED_SINCE = new Date(Math.floor(Date.now() / 1000) * 1000).toUTCString();

/** GET the agent card or the JWK set its signature names: public, cacheable JSON. */
function wellKnown(a2a: A2AFace, path: string, req: Parameters<RequestHandler>[0], res: Parameters<RequestHandler>[1], logger: Logger): void {
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" }).end("method not allowed\n");
    return;
  }
  const body = path === AGENT_CARD_PATH ? a2a.cardJson() : Promise.resolve(a2a.jwks());
  body.then(
    (json) => {
      const text = JSON.stringify(json);
      // Validators for conditional requests (spec 8.6.1): a hash of the content, and when this process began serving it.
      const etag = `"${createHash("sha256").update(text).digest("base64url").slice(0, 22)}"`;
      const headers = { etag, "last-modified": CARD_SERVED_SINCE, "cache-control": "public, max-age=300", "access-control-allow-origin": "*" };
      if (req.headers["if-none-match"]?.split(",").some((tag) => tag.trim() === etag)) {
        res.writeHead(304, headers).end();
        return;
      }
      res.writeHead(200, { "content-type": path === JWKS_PATH ? "application/jwk-set+json" : "application/json", ...headers });
      if (req.method === "HEAD") res.end();
      else res.end(text);
    },
    (error: unknown) => {
      logger.error({ err: error }, "agent card failed");
      res.writeHead(500, { "content-type": "text/plain" }).end("agent card unavailable\n");
    },
  );
}
