// A2A message ids as the engine remembers them. A2A leaves message ids to
// the client, unique per caller at best, so the engine's id prefixes the
// caller's agent id: two callers never collide, and one caller's id used
// again for another message is a replay.
const PREFIX = "a2a:";

/** The engine's message id for a caller's A2A message id. */
export function scopedMessageId(callerAgentId: string, messageId: string): string {
  return `${PREFIX}${Buffer.from(callerAgentId).toString("base64url")}:${messageId}`;
}

/** The client's message id back from the engine's (unchanged when it is not an A2A one). */
export function a2aMessageIdOf(scoped: string): string {
  if (!scoped.startsWith(PREFIX)) return scoped;
  const at = scoped.indexOf(":", PREFIX.length);
  return at < 0 ? scoped : scoped.slice(at + 1);
}
