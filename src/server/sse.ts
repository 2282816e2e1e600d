// Server-Sent Events framing for every SSE answer the server gives (a task's
// event stream, the A2A bindings' streams): the head, one frame per event
// (its id, type and data fields), a comment heartbeat that keeps idle proxies
// open, and writes that wait while the client has not taken what is
// buffered (write-waiting.ts; the listener's write timeout cuts a client
// that stops reading for good).
import type { HttpResponse } from "./http-reply.js";
import { writeWaiting } from "./write-waiting.js";

export const DEFAULT_SSE_HEARTBEAT_MS = 15_000;

export interface SseOptions {
  /** A comment line this often while the stream is open. */
  heartbeatMs?: number;
  /** More response headers (CORS, A2A-Extensions...). */
  headers?: Record<string, string>;
}

/** One event: `data` is a single line (JSON without raw newlines). */
export interface SseEvent {
  data: string;
  id?: string;
  event?: string;
  /** How long an EventSource waits before reconnecting, in ms. */
  retry?: number;
}

export interface SseStream {
  /** Writes one event; resolves when the client can take more (or the response is gone). */
  send(event: SseEvent): Promise<void>;
  /** Stops the heartbeat and ends the response. */
  end(): void;
}

export function frameOf(event: SseEvent): string {
  let frame = "";
  if (event.retry !== undefined) frame += `retry: ${event.retry}\n`;
  if (event.id !== undefined) frame += `id: ${event.id.replace(/[\r\n]/g, "")}\n`;
  if (event.event !== undefined) frame += `event: ${event.event.replace(/[\r\n]/g, "")}\n`;
  return `${frame}data: ${event.data}\n\n`;
}

/** Answers 200 text/event-stream and returns the stream's writer. */
export function startSse(res: HttpResponse, options: SseOptions = {}): SseStream {
  res.writeHead(200, {
    ...options.headers,
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
  });
  // Headers go out now, so the client knows the stream is open before the first event.
  (res as { flushHeaders?: () => void }).flushHeaders?.();
  const heartbeat = setInterval(() => void writeWaiting(res, ": heartbeat\n\n"), options.heartbeatMs ?? DEFAULT_SSE_HEARTBEAT_MS);
  heartbeat.unref();
  return {
    send: (event) => writeWaiting(res, frameOf(event)),
    end() {
      clearInterval(heartbeat);
      if (!res.writableEnded) res.end();
    },
  };
}
