// A group's event log: every change to a group is one commit that seals its
// events (a2n:group_event, signed by the host, addressed to the group,
// numbered after the group's last sequence) and writes them with the group,
// its group tasks and votes, and the message that caused it. A commit that
// lost a race to another (version conflict) is worked out again from the
// fresh state.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { GroupEventPayloadSchema } from "../../gen/synapse/v1/a2n_pb.js";
import { MessageType, type Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import { GroupSchema, type Group, type GroupTask, type Vote } from "../../gen/synapse/v1/group_pb.js";
import type { AgentIdentity } from "../agent/identity.js";
import type { MessageCause } from "../agent/message-gate.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import type { AgentObserver } from "../observability/agent-observer.js";
import { seal } from "../envelope/seal.js";
import type { GroupChange, GroupRecord, GroupStorage, StoredGroupEvent } from "../store/group-storage.js";
import { StoreConflictError } from "../store/store.js";

/** An event to record, before it is numbered and signed. */
export type EventDraft = Omit<MessageInitShape<typeof GroupEventPayloadSchema>, "groupId" | "$typeName">;

/** What one piece of work decides: the group after it, its events, and the group tasks and votes it changes. */
export interface Mutation<T> {
  group: Group;
  events: EventDraft[];
  groupTasks?: GroupTask[];
  votes?: Vote[];
  result: T;
}

/** The message that caused a change, as it will be remembered (its reply is the first event). */
export type GroupCause = MessageCause;

export interface Committed<T> {
  record: GroupRecord;
  events: StoredGroupEvent[];
  result: T;
}

const MAX_ATTEMPTS = 20;

export class GroupLog {
  constructor(
    private readonly storage: GroupStorage,
    private readonly identity: AgentIdentity,
    private readonly now: () => number,
    /** Told of each group event committed (sealing again after a conflict counts once). */
    private readonly observer?: Pick<AgentObserver, "messageSent">,
  ) {}

  private committed(events: readonly StoredGroupEvent[]): void {
    for (const event of events) this.observer?.messageSent(event.header.messageType);
  }

  get host() {
    return { agentId: this.identity.agentId, systemId: this.identity.systemId, keyId: this.identity.key.keyId };
  }

  /** Numbers and signs drafts after `lastSequence`; each names its cause's message id. */
  seal(groupId: string, lastSequence: number, drafts: readonly EventDraft[], atMs: number): StoredGroupEvent[] {
    return drafts.map((draft, index) => {
      const payload = create(GroupEventPayloadSchema, { ...draft, groupId });
      const sequence = lastSequence + index + 1;
      const replyTo = causeId(draft);
      const { envelope, header } = seal(
        { messageType: MessageType.A2N_GROUP_EVENT, payload, sender: this.host, receiver: { agentId: groupId }, sequence: BigInt(sequence), replyTo, sentAtMs: atMs },
        this.identity.key,
      );
      return { groupId, sequence, envelope, header, payload };
    });
  }

  /** The change a mutation makes after `lastSequence`, with its events sealed. */
  private change<T>(mutation: Mutation<T>, lastSequence: number, cause: GroupCause | undefined): { change: GroupChange; events: StoredGroupEvent[] } {
    const atMs = this.now();
    const group = create(GroupSchema, { ...mutation.group, lastSequence: BigInt(lastSequence + mutation.events.length), updatedAt: timestampFromMs(atMs) });
    const events = this.seal(group.groupId, lastSequence, mutation.events, atMs);
    const first = events[0];
    const message = cause === undefined ? undefined : { ...cause, reply: first && { envelope: first.envelope, header: first.header, payload: first.payload } };
    return { change: { group, events, groupTasks: mutation.groupTasks, votes: mutation.votes, message, atMs }, events };
  }

  async create<T>(mutation: Mutation<T>, cause: GroupCause): Promise<Committed<T>> {
    const { change, events } = this.change(mutation, 0, cause);
    const record = await this.storage.createGroup({ ...change, group: create(GroupSchema, { ...change.group, createdAt: timestampFromMs(change.atMs) }) });
    this.committed(events);
    return { record, events, result: mutation.result };
  }

  /**
   * Runs `work` on the group as it is now and commits what it decides. On a
   * version conflict the work runs again on the fresh state; anything it
   * throws refuses the change. Work that decides nothing (no events) commits nothing.
   */
  async update<T>(groupId: string, work: (record: GroupRecord) => Mutation<T> | Promise<Mutation<T>>, cause?: GroupCause): Promise<Committed<T> | undefined> {
    for (let attempt = 1; ; attempt++) {
      const record = await this.storage.getGroup(groupId);
      if (record === undefined) return undefined;
      const mutation = await work(record);
      if (mutation.events.length === 0) return { record, events: [], result: mutation.result };
      const { change, events } = this.change(mutation, record.lastSequence, cause);
      try {
        const committed = await this.storage.commitGroup(groupId, record.version, change);
        this.committed(events);
        return { record: committed, events, result: mutation.result };
      } catch (error) {
        if (!(error instanceof StoreConflictError) || error.reason !== "version" || attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  }
}

/** Message ids of the causes drafts carry (known from the opened envelope; never parsed again). */
const causeIds = new WeakMap<object, string>();

function causeId(draft: EventDraft): string {
  return draft.cause === undefined ? "" : (causeIds.get(draft.cause) ?? "");
}

/** The draft field that carries a verified message as an event's cause (its id becomes Header.reply_to). */
export function causedBy(opened: OpenedEnvelope): { cause: Envelope } {
  causeIds.set(opened.envelope, opened.header.messageId);
  return { cause: opened.envelope };
}
