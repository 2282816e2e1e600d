// Exactly-once intake of signed messages, shared by the P2P engine and the
// group host: a message id already remembered is answered from memory (the
// same envelope again gets its first reply, another one under that id is a
// replay), a twin arriving while the first is still being handled waits for
// that first one, and a twin that lost the race to commit (here or at
// another instance sharing the store) gets the winner's reply.
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import { protocolError } from "../protocol/errors.js";
import { StoreConflictError, type MessageScope, type MessageStore, type SeenMessage } from "../store/store.js";

/** What a commit remembers of the message that caused it. */
export type MessageCause = Omit<SeenMessage, "reply">;

/** The seen message a cause becomes with its reply (field by field: a spread that adds a field makes a hidden class per copy). */
export function seenWithReply(cause: MessageCause, reply: SeenMessage["reply"], taskId: string | undefined): SeenMessage {
  return { scope: cause.scope, messageId: cause.messageId, senderAgentId: cause.senderAgentId, digest: cause.digest, keepUntilMs: cause.keepUntilMs, taskId, reply };
}

export interface MessageGateOptions {
  scope: MessageScope;
  messages: Pick<MessageStore, "getMessage">;
  clockSkewMs: number;
  now: () => number;
}

export function replayed(messageId: string) {
  return protocolError(ErrorCode.REPLAY_DETECTED, `message id ${messageId} was already used by another message`);
}

/**
 * What the gate reads of a message: its header and digest. An envelope, or a
 * message a caller authenticated another way sent without one (A2A).
 */
export type GatedMessage = Pick<OpenedEnvelope, "header" | "digest">;

/** Whether a remembered message is this very envelope again (same bytes, same sender). */
export function isRedelivery(opened: GatedMessage, seen: SeenMessage): boolean {
  return seen.digest === opened.digest && seen.senderAgentId === opened.header.sender!.agentId;
}

export class MessageGate<Outcome> {
  private readonly inflight = new Map<string, { digest: string; work: Promise<Outcome> }>();

  constructor(private readonly options: MessageGateOptions) {}

  /**
   * Runs `dispatch` once per message id; a message seen before goes to
   * `redelivered` with what was remembered of it (which refuses a replay).
   */
  async take(opened: GatedMessage, dispatch: (cause: MessageCause) => Promise<Outcome>, redelivered: (seen: SeenMessage) => Promise<Outcome>): Promise<Outcome> {
    const { header } = opened;
    const { scope, messages, clockSkewMs, now } = this.options;
    const seen = await messages.getMessage(scope, header.messageId);
    if (seen !== undefined) return redelivered(seen);
    const pending = this.inflight.get(header.messageId);
    if (pending !== undefined) {
      if (pending.digest !== opened.digest) throw replayed(header.messageId);
      return pending.work;
    }
    // Remembered as long as the message could still be accepted, plus the skew.
    const expiresAtMs = header.expiresAt ? Number(header.expiresAt.seconds) * 1000 : now() + clockSkewMs;
    const cause: MessageCause = {
      scope,
      messageId: header.messageId,
      senderAgentId: header.sender!.agentId,
      digest: opened.digest,
      keepUntilMs: expiresAtMs + clockSkewMs,
      taskId: header.taskId || undefined,
    };
    const work = dispatch(cause);
    this.inflight.set(header.messageId, { digest: opened.digest, work });
    try {
      return await work;
    } catch (error) {
      // Another delivery of the same id got there first (here or at another instance).
      if (error instanceof StoreConflictError && error.reason === "message") {
        const first = await messages.getMessage(scope, header.messageId);
        if (first !== undefined) return redelivered(first);
      }
      throw error;
    } finally {
      this.inflight.delete(header.messageId);
    }
  }
}
