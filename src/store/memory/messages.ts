// The messages already processed, in memory. Most are never asked for
// again (only a re-delivery or a reused id is), yet each is kept until it
// would be refused as expired anyway, so each is kept small: its reply as
// the exact signed bytes, decoded when asked for. A message that caused a
// change of a live task keeps its reply as the event object the task holds
// (no second copy) until the task is packed; then it points at that event
// in the packed task.
import { decodeSigned, envelopeBytes } from "../codec.js";
import type { MessageScope, SeenMessage, StoredEvent } from "../store.js";
import { PackedTask } from "./packed.js";
import { ownBytes } from "./sections.js";

/** A remembered message without its decoded reply; its scope and id are its keys. */
class PackedMessage {
  constructor(
    readonly senderAgentId: string,
    readonly digest: string,
    readonly keepUntilMs: number,
    readonly taskId: string | undefined,
    /** The reply's signed envelope as sealed: its own bytes, or the packed task holding it as an event. */
    private readonly reply: Uint8Array | PackedTask | undefined,
    private readonly replySequence = 0,
  ) {}

  replyBytes(): Uint8Array | undefined {
    return this.reply instanceof PackedTask ? this.reply.eventBytes(this.replySequence) : this.reply;
  }
}

function packed(entry: SeenMessage): PackedMessage {
  const reply = entry.reply === undefined ? undefined : ownBytes(envelopeBytes(entry.reply.envelope));
  return new PackedMessage(entry.senderAgentId, entry.digest, entry.keepUntilMs, entry.taskId, reply);
}

export class MemoryMessages {
  // By scope, then id: the id string is the key as it came, not a joined copy.
  private readonly scopes = new Map<MessageScope, Map<string, SeenMessage | PackedMessage>>();

  private scope(scope: MessageScope): Map<string, SeenMessage | PackedMessage> {
    let entries = this.scopes.get(scope);
    if (entries === undefined) {
      entries = new Map();
      this.scopes.set(scope, entries);
    }
    return entries;
  }

  has(scope: MessageScope, messageId: string): boolean {
    return this.scopes.get(scope)?.has(messageId) ?? false;
  }

  get(scope: MessageScope, messageId: string): SeenMessage | undefined {
    const entry = this.scopes.get(scope)?.get(messageId);
    if (!(entry instanceof PackedMessage)) return entry;
    const reply = entry.replyBytes();
    return {
      scope,
      messageId,
      senderAgentId: entry.senderAgentId,
      digest: entry.digest,
      keepUntilMs: entry.keepUntilMs,
      taskId: entry.taskId,
      reply: reply === undefined ? undefined : decodeSigned(reply),
    };
  }

  /**
   * Remembers a message. `live`: it belongs to a task still held as objects,
   * which keeps the entry and packs it with itself (packWith); otherwise it
   * is packed now.
   */
  put(entry: SeenMessage, live = false): void {
    this.scope(entry.scope).set(entry.messageId, live ? entry : packed(entry));
  }

  /** The messages a task kept (`entries`) now point at its events in `task`, or hold their own reply's bytes. */
  packWith(entries: readonly SeenMessage[], task: PackedTask, events: readonly StoredEvent[]): void {
    for (const entry of entries) {
      const scope = this.scopes.get(entry.scope);
      // Pruned meanwhile, or the id taken by another message since.
      if (scope?.get(entry.messageId) !== entry) continue;
      const event = entry.reply === undefined ? undefined : events.find((candidate) => candidate.envelope === entry.reply!.envelope);
      // Strings the packed task holds anyway are shared, not kept twice.
      const sender = entry.senderAgentId === task.requesterAgentId ? task.requesterAgentId : entry.senderAgentId;
      scope.set(entry.messageId, event === undefined ? packed(entry) : new PackedMessage(sender, entry.digest, entry.keepUntilMs, task.taskId, task, event.sequence));
    }
  }

  prune(nowMs: number): number {
    let dropped = 0;
    for (const entries of this.scopes.values()) {
      for (const [messageId, entry] of entries) {
        if (entry.keepUntilMs <= nowMs) {
          entries.delete(messageId);
          dropped++;
        }
      }
    }
    return dropped;
  }
}
