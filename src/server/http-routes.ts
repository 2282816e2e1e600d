// The plain HTTP paths beside the RPCs: POST /upload, the SSE event stream
// GET /tasks/{task_id}/events, and the operator console; anything else 404,
// or the embedding server's own routes (fallback).
import type { Agent } from "../agent/agent.js";
import type { Logger } from "../log.js";
import { CONSOLE_PATH, consoleHandler } from "./console.js";
import { eventsPathTaskId, eventStreamHandler } from "./event-stream.js";
import type { RequestHandler } from "./listener.js";
import { UPLOAD_PATH, uploadHandler } from "./upload.js";

export interface HttpRoutesOptions {
  /** Without an agent only the console is served. */
  agent?: Agent;
  draining: AbortSignal;
  logger: Logger;
  /** The SSE comment heartbeat interval (default 15 s). */
  sseHeartbeatMs?: number;
  /** Answers every other path (an embedding server's own routes); default the console's 404. */
  fallback?: RequestHandler;
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
  if (agent === undefined) return consolePage;
  const bearer = { audience: agent.identity.agentId, trust: agent.trust };
  const upload = uploadHandler({ uploads: agent.uploads, bearer, logger: options.logger });
  const events = eventStreamHandler({ agent, bearer, draining: options.draining, heartbeatMs: options.sseHeartbeatMs });
  return (req, res) => {
    const path = (req.url ?? "").split("?", 1)[0] ?? "";
    if (path === UPLOAD_PATH) return upload(req, res);
    const taskId = eventsPathTaskId(path);
    if (taskId !== undefined) return events(req, res, taskId);
    consolePage(req, res);
  };
}
