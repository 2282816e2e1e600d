// Recording what happens to a task: each state change is checked against
// the state machine, sealed as a signed event with the next sequence, and
// committed with it in one versioned store commit (retried when another
// writer got there first). Also seals the replies that are not task events.
// Every event carries the trace context, session and correlation ids of the
// task's request; every reply those of the message it answers. Observers
// hear of each state change and each message signed; with a tracer
// installed, each change and each signing is a span in the task's trace.
import type { Message } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import { MessageType, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { AgentStatus, HeartbeatPayloadSchema, TaskState, type DecisionAction } from "../../gen/synapse/v1/payloads_pb.js";
import type { CapabilitiesProvider } from "../capabilities/provider.js";
import { sealMessage } from "../envelope/confidential.js";
import { seal } from "../envelope/seal.js";
import type { AgentObserver } from "../observability/agent-observer.js";
import { sending, transitioning } from "../observability/spans.js";
import { carriedSealFields } from "../observability/trace-context.js";
import { protocolError } from "../protocol/errors.js";
import { transition, TERMINAL_STATES } from "../protocol/state-machine.js";
import { StoreConflictError, type CarriedIds, type PartyRecord, type SeenMessage, type StoredEvent, type StoredReply, type TaskPatch, type TaskRecord, type TaskStore } from "../store/store.js";
import type { AgentIdentity } from "./identity.js";
import { seenWithReply } from "./message-gate.js";
import type { TaskKeys } from "./task-keys.js";

/** States in which a task holds one of the max_concurrent_tasks slots. */
export const ACTIVE_STATES = Object.values(TaskState).filter(
  (state): state is TaskState => typeof state === "number" && state !== TaskState.UNSPECIFIED && state !== TaskState.IDLE && !TERMINAL_STATES.has(state),
);

const MAX_COMMIT_ATTEMPTS = 8;

export interface Built {
  /** The event's type, unless the request names it. */
  type?: MessageType;
  message: Message;
  /** The payload's bytes, when built with it (see task-result.ts). */
  encoded?: Uint8Array;
  /** The fields the event changes; the state and the time are the recorder's. */
  patch: Omit<TaskPatch, "state" | "updatedAtMs">;
}

export interface RecordRequest {
  taskId: string;
  /** The message whose transition is applied (an inbound one, for acknowledgements); default the event's type. */
  apply?: MessageType;
  action?: DecisionAction;
  /** The event recorded; default the type `build` returns. */
  eventType?: MessageType;
  build: (task: TaskRecord) => Built;
  replyTo?: string;
  /** The inbound message that caused the change: remembered in the same commit, with the event as its reply. */
  cause?: Omit<SeenMessage, "reply">;
  /** Commit only while this instance holds the task's lease (StoreConflictError "lease" otherwise). */
  fence?: string;
}

export interface Recorded {
  task: TaskRecord;
  event: StoredEvent;
}

export interface RecorderOptions {
  identity: AgentIdentity;
  capabilities: CapabilitiesProvider;
  store: TaskStore;
  now: () => number;
  /** Told of each committed state change and each message signed. */
  observer: Pick<AgentObserver, "transition" | "messageSent">;
  /** The keys of confidential tasks, whose events are sealed with them. */
  keys: TaskKeys;
}

export class EventRecorder {
  constructor(private readonly options: RecorderOptions) {}

  /** The keys of confidential tasks. */
  get keys(): TaskKeys {
    return this.options.keys;
  }

  get self(): PartyRecord {
    const { identity } = this.options;
    return { agentId: identity.agentId, systemId: identity.systemId, keyId: identity.key.keyId };
  }

  /**
   * Applies a transition and records its event in one commit, retrying on
   * concurrent change. Undefined when the task is gone or its state no
   * longer allows the transition.
   */
  async record(request: RecordRequest): Promise<Recorded | undefined> {
    const { store, now } = this.options;
    for (let attempt = 0; attempt < MAX_COMMIT_ATTEMPTS; attempt++) {
      const current = await store.getTask(request.taskId);
      if (current === undefined) return undefined;
      const built = request.build(current);
      const type = request.eventType ?? built.type!;
      const step = transition(current.state, request.apply ?? type, request.action);
      if (!step.allowed) return undefined;
      const commit = async (): Promise<Recorded | undefined> => {
        const event = this.sealEvent(current, type, built.message, current.lastSequence + 1, request.replyTo, built.encoded);
        const message = request.cause === undefined ? undefined : seenWithReply(request.cause, event, current.taskId);
        try {
          // The patch is spread last: in V8 11, fields added after a spread give every such object a new
          // hidden class, allocated in the old generation (two per task here, and more full GCs).
          const task = await store.commit(current.taskId, current.version, { state: step.next, updatedAtMs: now(), ...built.patch }, event, {
            message,
            fence: request.fence,
          });
          return { task, event };
        } catch (error) {
          if (!(error instanceof StoreConflictError) || (error.reason !== "version" && error.reason !== "sequence")) throw error;
          return undefined; // another writer got there first: look again
        }
      };
      // An event that leaves the state as it is (progress) is a message, not a transition.
      const recorded = step.next === current.state ? await commit() : await transitioning(current.taskId, current.state, step.next, current.carried, commit);
      if (recorded !== undefined) {
        this.committed(current.state, recorded);
        return recorded;
      }
    }
    throw protocolError(ErrorCode.INTERNAL, `task ${request.taskId} kept changing; try again`);
  }

  /** Tells the observer of a committed event and the state change it recorded (`from`: the state before). */
  committed(from: TaskState, { task, event }: Recorded): void {
    this.options.observer.messageSent(event.header.messageType);
    if (from !== task.state) this.options.observer.transition(from, task.state, task);
  }

  sealEvent(task: Pick<TaskRecord, "taskId" | "requester" | "carried" | "confidential">, type: MessageType, message: Message, sequence: number, replyTo?: string, encodedPayload?: Uint8Array): StoredEvent {
    // A confidential task's events are signed, then sealed with its key (docs/PROTOCOL.md §9.4).
    const sealing = task.confidential === undefined ? undefined : { taskKey: this.options.keys.of(task) };
    const { envelope, header } = sending(type, task.carried, () =>
      sealMessage(
        {
          messageType: type,
          payload: message,
          sender: { agentId: this.self.agentId, systemId: this.self.systemId },
          receiver: task.requester,
          taskId: task.taskId,
          replyTo,
          sequence: BigInt(sequence),
          sentAtMs: this.options.now(),
          encodedPayload,
          ...carriedSealFields(task.carried),
        },
        this.options.identity.key,
        sealing,
      ),
    );
    return { taskId: task.taskId, sequence, envelope, header, payload: message };
  }

  /** A signed reply that is not a task event; it carries the ids of the message it answers. */
  reply(to: Header, type: MessageType, message: Message): StoredReply {
    const { envelope, header } = sending(type, to.trace, () =>
      seal(
        {
          messageType: type,
          payload: message,
          sender: { agentId: this.self.agentId, systemId: this.self.systemId },
          receiver: { agentId: to.sender!.agentId, systemId: to.sender!.systemId },
          taskId: to.taskId,
          replyTo: to.messageId,
          sessionId: to.sessionId,
          correlationId: to.correlationId,
          traceparent: to.trace?.traceparent,
          tracestate: to.trace?.tracestate,
          sentAtMs: this.options.now(),
        },
        this.options.identity.key,
      ),
    );
    this.options.observer.messageSent(type);
    return { envelope, header, payload: message };
  }

  /** The agent's load, as a heartbeat says it. */
  async heartbeatPayload(draining: boolean) {
    const active = await this.options.store.countTasks(ACTIVE_STATES);
    const max = this.options.capabilities.getCapabilities().maxConcurrentTasks;
    return create(HeartbeatPayloadSchema, {
      status: draining ? AgentStatus.DRAINING : active >= max ? AgentStatus.BUSY : AgentStatus.READY,
      activeTasks: active,
      maxConcurrentTasks: max,
    });
  }

  /** A signed heartbeat for a peer (also sent on idle Watch streams, carrying the watched task's ids). */
  async sealHeartbeat(receiver: PartyRecord, draining: boolean, carried?: CarriedIds): Promise<StoredReply> {
    const message = await this.heartbeatPayload(draining);
    const { envelope, header } = sending(MessageType.HEARTBEAT, carried, () =>
      seal(
        { messageType: MessageType.HEARTBEAT, payload: message, sender: this.self, receiver, sentAtMs: this.options.now(), ...carriedSealFields(carried) },
        this.options.identity.key,
      ),
    );
    this.options.observer.messageSent(MessageType.HEARTBEAT);
    return { envelope, header, payload: message };
  }
}
