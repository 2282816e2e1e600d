// Message ids of callers who choose their own without signing them (A2A
// clients). Such ids are unique per caller at best, so the engine's id
// prefixes the caller's agent id: two callers never collide, and one
// caller's id used again for another message is a replay. A handler sees
// the id as the caller chose it.
const PREFIX = "a2a:";

/** The engine's message id for a caller's own message id. */
export function scopedMessageId(callerAgentId: string, messageId: string): string {
  return `${PREFIX}${Buffer.from(callerAgentId).toString("base64url")}:${messageId}`;
}

/** The caller's message id back from the engine's (unchanged when it was not scoped). */
export function requesterMessageId(scoped: string): string {
  if (!scoped.startsWith(PREFIX)) return scoped;
  const at = scoped.indexOf(":", PREFIX.length);
  return at < 0 ? scoped : scoped.slice(at + 1);
}
