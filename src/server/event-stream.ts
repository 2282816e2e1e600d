// GET /tasks/{task_id}/events: a task's signed events as Server-Sent Events
// (StreamingTransport over SSE), for curl -N and a browser's EventSource.
// The same events as Watch, read from the task's log: each `data` is the
// signed message as proto3 JSON (the view Watch gives JSON readers), its
// `id` the event's sequence, so Last-Event-ID resumes with nothing lost or
// repeated. A comment line keeps idle proxies open; the stream ends after
// the terminal event, and a reconnect after that gets 204 (EventSource
// then stops). Auth: a bearer token in the Authorization header, or, for
// EventSource (which cannot set headers), in the access_token query
// parameter (docs/PROTOCOL.md §5.5.1 says what that risks).
import { toJson } from "@bufbuild/protobuf";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { SignedMessageSchema, TaskSchema } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { Agent } from "../agent/agent.js";
import type { WatchItem } from "../agent/reader.js";
import { taskView } from "../agent/task-view.js";
import { signedMessage } from "../envelope/view.js";
import { protocolError } from "../protocol/errors.js";
import { isTerminal } from "../protocol/state-machine.js";
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import type { StoredEvent } from "../store/store.js";
import { authenticateHeader, authenticateToken, type BearerPolicy } from "./auth.js";
import { replyError, type HttpRequest, type HttpResponse } from "./http-reply.js";
import { DEFAULT_SSE_HEARTBEAT_MS, startSse } from "./sse.js";
import { linkedSignal } from "../abort.js";

const EVENTS_PATH = /^\/tasks\/([^/]+)\/events$/;
/** How long EventSource waits before reconnecting (the `retry` field). */
const RETRY_MS = 2_000;

/** The task id of an events path, or undefined when the path is not one. */
export function eventsPathTaskId(path: string): string | undefined {
  const match = EVENTS_PATH.exec(path);
  if (match === null) return undefined;
  try {
    return decodeURIComponent(match[1]!);
  } catch {
    return undefined;
  }
}

export interface EventStreamOptions {
  agent: Agent;
  bearer: BearerPolicy;
  /** Open streams end when this aborts (shutdown). */
  draining: AbortSignal;
  /** A comment line this often keeps proxies from closing an idle stream. */
  heartbeatMs?: number;
}

const CORS = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Headers": "Authorization, Last-Event-ID",
  "Access-Control-Allow-Methods": "GET",
};

// Each event's JSON is made once and sent to every reader.
const eventJson = new WeakMap<Envelope, string>();
function dataOf(event: StoredEvent): string {
  let json = eventJson.get(event.envelope);
  if (json === undefined) {
    json = JSON.stringify(toJson(SignedMessageSchema, signedMessage(event.envelope, event.header, event.payload)));
    eventJson.set(event.envelope, json);
  }
  return json;
}

/** The sequence to resume after: Last-Event-ID, or last_event_id in the query (a new EventSource cannot set the header). */
function lastEventId(req: HttpRequest, query: URLSearchParams): number {
  const raw = req.headers["last-event-id"] ?? query.get("last_event_id") ?? "";
  const value = Array.isArray(raw) ? raw[0]! : raw;
  if (value === "") return 0;
  if (!/^\d{1,15}$/.test(value)) throw protocolError(ErrorCode.INVALID_PARAMS, "Last-Event-ID must be an event sequence number");
  return Number(value);
}

export function eventStreamHandler(options: EventStreamOptions): (req: HttpRequest, res: HttpResponse, taskId: string) => void {
  const heartbeatMs = options.heartbeatMs ?? DEFAULT_SSE_HEARTBEAT_MS;
  return (req, res, taskId) => {
    if (req.method === "OPTIONS") {
      res.writeHead(204, { ...CORS, "Access-Control-Max-Age": "600" });
      res.end();
      return;
    }
    if (req.method !== "GET") {
      res.writeHead(405, { Allow: "GET", "Content-Type": "text/plain; charset=utf-8" });
      res.end("GET this path for a task's events as text/event-stream\n");
      return;
    }
    const closed = new AbortController();
    const { signal, release } = linkedSignal(closed.signal, options.draining);
    res.once("close", () => closed.abort());
    void serve(req, res, taskId, signal, heartbeatMs, options)
      .catch((error: unknown) => {
        if (!res.headersSent) replyError(res, error, { headers: CORS });
        else res.end();
      })
      .finally(release);
  };
}

async function serve(req: HttpRequest, res: HttpResponse, taskId: string, signal: AbortSignal, heartbeatMs: number, options: EventStreamOptions): Promise<void> {
  const query = new URL(req.url ?? "/", "http://localhost").searchParams;
  const header = req.headers.authorization;
  const token = query.get("access_token");
  const caller = header === undefined && token !== null ? await authenticateToken(options.bearer, token) : await authenticateHeader(options.bearer, header);
  const after = lastEventId(req, query);
  // An operator key reads every task here too, as with Watch.
  const reader = { agentId: caller.agentId, operator: options.agent.operatorKeyIds.has(caller.keyId) };
  const items = options.agent.reader.watch(taskId, reader, after + 1, signal, { heartbeats: false });
  // The first item is the snapshot: a task the caller may not see fails here, before any header is sent.
  const first = await items.next();
  if (first.done || first.value.kind !== "snapshot") return void res.end();
  const snapshot = first.value.task;
  if (isTerminal(snapshot.state) && after >= snapshot.lastSequence) {
    // Nothing more will ever come: 204 tells EventSource not to reconnect.
    await items.return(undefined);
    res.writeHead(204, CORS);
    res.end();
    return;
  }
  const stream = startSse(res, { heartbeatMs, headers: { ...CORS, "Referrer-Policy": "no-referrer" } });
  try {
    await stream.send({ retry: RETRY_MS, event: "snapshot", data: JSON.stringify(toJson(TaskSchema, taskView(snapshot))) });
    for await (const item of items as AsyncIterable<WatchItem>) {
      if (item.kind === "event") await stream.send({ id: String(item.event.sequence), data: dataOf(item.event) });
    }
    // The watch ended after the terminal event (or the stream is closing): say which, so a browser can close() its EventSource.
    const final = signal.aborted ? undefined : await options.agent.store.getTask(taskId);
    if (final !== undefined && isTerminal(final.state)) {
      await stream.send({ event: "end", data: JSON.stringify({ state: `TASK_STATE_${TaskState[final.state]}`, lastSequence: String(final.lastSequence) }) });
    }
  } finally {
    stream.end();
  }
}
