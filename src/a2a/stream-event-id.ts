// A stream event's resume point, from the A2A service to the SSE bindings.
// The service tags each StreamResponse it yields with the position a client
// resumes after (the task event's sequence); the bindings write it as the
// SSE `id` field, so an SSE client that reconnects sends it back as
// Last-Event-ID, which reaches the service untouched in
// ctx.requestHeader.get("last-event-id"). gRPC has no such field; the
// service says there how a client resumes.
const ids = new WeakMap<object, string>();

/** The header a resuming SSE client sends; the bindings leave it in the context's requestHeader. */
export const LAST_EVENT_ID_HEADER = "last-event-id";

/** Tags `response` (a StreamResponse or its init shape) with its resume point; returns it. */
export function withStreamEventId<T extends object>(response: T, id: string | number | bigint): T {
  ids.set(response, String(id));
  return response;
}

/** The resume point the service tagged `response` with, if any. */
export function streamEventIdOf(response: unknown): string | undefined {
  return typeof response === "object" && response !== null ? ids.get(response) : undefined;
}
