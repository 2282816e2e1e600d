// The plain HTTP paths beside the RPCs: POST /upload, the SSE event stream
// GET /tasks/{task_id}/events, and the operator console; anything else 404.
import type { Agent } from "../agent/agent.js";
import type { Logger } from "../log.js";
import { consoleHandler } from "./console.js";
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
}

export function httpRoutes(options: HttpRoutesOptions): RequestHandler {
  const consolePage = consoleHandler();
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
