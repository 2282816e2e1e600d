// The executor side of the P2P protocol: takes verified inbound messages,
// checks each against the task's state and the sender's role, and records
// every state change as a signed event through the store, with the message
// that caused it in the same commit, so that a message is acted on once,
// by whichever instance receives it, before or after a restart.
import { create } from "@bufbuild/protobuf";
import { MessageType, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  AckPayloadSchema,
  CapabilityResponsePayloadSchema,
  type CapabilityQueryPayload,
  type HumanDecisionPayload,
  type TaskCancelPayload,
  type TaskInfoProvidedPayload,
  type TaskRequestPayload,
  type TaskState,
} from "../../gen/synapse/v1/payloads_pb.js";
import type { CapabilitiesProvider } from "../capabilities/provider.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import type { Logger } from "../log.js";
import type { OutboundPolicy } from "../net/outbound-policy.js";
import type { AgentObserver } from "../observability/agent-observer.js";
import { messageLogFields } from "../observability/log-fields.js";
import { ATTR, receiving } from "../observability/spans.js";
import { protocolError, taskNotFound } from "../protocol/errors.js";
import { isTerminal, stateName, WAITING_STATES } from "../protocol/state-machine.js";
import type { SeenMessage, StoredReply, TaskRecord, TaskStore } from "../store/store.js";
import type { CallbackSender } from "./callbacks.js";
import type { TaskEventBus } from "./events.js";
import type { TaskKeys } from "./task-keys.js";
import type { TaskHandler } from "./handler.js";
import type { CallbackInbox } from "./inbox.js";
import { TaskIntake } from "./intake.js";
import { TaskSteering } from "./steering.js";
import type { EventRecorder } from "./recorder.js";
import type { ExecutionRunner } from "./runner.js";
import { onAbort, type Abortable } from "../abort.js";
import { isRedelivery, MessageGate, replayed, seenWithReply, type GatedMessage } from "./message-gate.js";
import type { Cause, SendOutcome } from "./send-outcome.js";
import type { TaskSchemas } from "./schemas.js";
import type { AgentUploads } from "./uploads.js";

export interface EngineOptions {
  /** Takes events pushed for tasks this agent requested. */
  inbox: CallbackInbox;
  /** The keys of confidential tasks. */
  keys: TaskKeys;
  capabilities: CapabilitiesProvider;
  handlers: ReadonlyMap<string, TaskHandler>;
  schemas: TaskSchemas;
  store: TaskStore;
  bus: TaskEventBus;
  recorder: EventRecorder;
  runner: ExecutionRunner;
  /** Pushes the events of tasks that asked for callbacks. */
  callbacks: CallbackSender;
  /** Where callbacks may go: a callback_url it refuses is refused at Send. */
  outbound: OutboundPolicy;
  logger: Logger;
  clockSkewMs: number;
  now: () => number;
  /** The files task requests may name. */
  uploads: AgentUploads;
  /** Told of every message taken. */
  observer: Pick<AgentObserver, "messageReceived">;
}

/**
 * A requester's message that came without an envelope, from a caller the
 * server authenticated another way (an A2A client with a bearer token, or
 * the anonymous party of open mode). It takes the same checks as a signed
 * one, and is remembered under its own scope ("a2a"), so it is never taken
 * for, nor answered as, a signed message.
 */
export interface UnsignedMessage {
  /** The header an envelope would carry; its sender is the authenticated caller. Never signed. */
  header: Header;
  payload: TaskRequestPayload | TaskCancelPayload | TaskInfoProvidedPayload | HumanDecisionPayload;
  /** Identifies the message's content: another message under the same id is a replay. */
  digest: string;
}

export class TaskEngine {
  private readonly gate: MessageGate<SendOutcome>;
  private readonly unsignedGate: MessageGate<SendOutcome>;
  private draining = false;
  private readonly intake: TaskIntake;
  private readonly steering: TaskSteering;

  constructor(private readonly options: EngineOptions) {
    this.intake = new TaskIntake({ ...options, draining: () => this.draining });
    this.steering = new TaskSteering(options);
    this.gate = new MessageGate({ scope: "p2p", messages: options.store, clockSkewMs: options.clockSkewMs, now: options.now });
    this.unsignedGate = new MessageGate({ scope: "a2a", messages: options.store, clockSkewMs: options.clockSkewMs, now: options.now });
  }

  // ── inbound ────────────────────────────────────────────────────────────

  /**
   * Handles one verified message. An exact re-delivery gets the first
   * reply again and has no second effect; another envelope reusing a
   * message id is refused. A refused message is not remembered, so it may
   * be sent again.
   */
  receive(opened: OpenedEnvelope): Promise<SendOutcome> {
    this.options.observer.messageReceived(opened.header.messageType);
    // Without a tracer `receiving` calls back with no span: no promise is added to the call.
    return receiving(opened.header, this.options.recorder.self.agentId, (span) => {
      if (span === undefined) return this.take(opened);
      return this.take(opened).then((outcome) => {
        const state = outcome.task?.state ?? outcome.state;
        if (state !== undefined) span.setAttribute(ATTR.state, stateName(state));
        return outcome;
      });
    });
  }

  private take(opened: OpenedEnvelope): Promise<SendOutcome> {
    return this.gate.take(
      opened,
      (cause) => this.dispatch(opened, cause),
      (seen) => this.redelivered(opened, seen),
    );
  }

  /**
   * Handles a requester's message that came without an envelope (see
   * UnsignedMessage): a task request, a cancel, information or a decision,
   * with the intake's and steering's checks, once per message id.
   */
  receiveUnsigned(message: UnsignedMessage): Promise<SendOutcome> {
    const { header } = message;
    this.options.observer.messageReceived(header.messageType);
    return this.unsignedGate.take(
      message,
      (cause) =>
        this.fromRequester(header, message.payload, cause) ??
        Promise.reject(protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "only a requester's task request, cancel, information or decision comes unsigned")),
      (seen) => this.redelivered(message, seen),
    );
  }

  /** A requester's task request, cancel, information or decision, signed or not; undefined for any other message type. */
  private fromRequester(header: Header, payload: unknown, cause: Cause): Promise<SendOutcome> | undefined {
    switch (header.messageType) {
      case MessageType.TASK_REQUEST:
        return this.intake.request(header, payload as TaskRequestPayload, cause);
      case MessageType.TASK_CANCEL:
        return this.steering.cancel(header, payload as TaskCancelPayload, cause);
      case MessageType.TASK_INFO_PROVIDED:
        return this.steering.provideInfo(header, payload as TaskInfoProvidedPayload, cause);
      case MessageType.HUMAN_DECISION:
        return this.steering.decide(header, payload as HumanDecisionPayload, cause);
      default:
        return undefined;
    }
  }

  private async redelivered(opened: GatedMessage, seen: SeenMessage): Promise<SendOutcome> {
    if (!isRedelivery(opened, seen)) throw replayed(opened.header.messageId);
    return { reply: seen.reply, task: seen.taskId ? await this.options.store.getTask(seen.taskId) : undefined };
  }

  /** Remembers a message whose reply is not a task event; a concurrent twin's reply wins. */
  private async answered(opened: OpenedEnvelope, cause: Cause, reply: StoredReply | undefined, task?: TaskRecord): Promise<SendOutcome> {
    const existing = await this.options.store.rememberMessage(seenWithReply(cause, reply, task?.taskId ?? cause.taskId));
    if (existing !== undefined) return this.redelivered(opened, existing);
    return { reply, task };
  }

  private async dispatch(opened: OpenedEnvelope, cause: Cause): Promise<SendOutcome> {
    const { header, info } = opened;
    const { recorder } = this.options;
    const fromRequester = this.fromRequester(header, opened.payload, cause);
    if (fromRequester !== undefined) return fromRequester;
    switch (header.messageType) {
      case MessageType.TASK_ACK:
        // An executor's task_ack (recorded after information or a decision) pushed to the agent that requested the task.
        if (header.taskId && (await this.options.inbox.expects(opened))) return this.callback(opened, cause);
        return this.onTaskAck(opened, cause);
      case MessageType.HEARTBEAT:
        return this.answered(opened, cause, recorder.reply(header, MessageType.HEARTBEAT, await recorder.heartbeatPayload(this.draining)));
      case MessageType.CAPABILITY_QUERY:
        return this.answered(opened, cause, recorder.reply(header, MessageType.CAPABILITY_RESPONSE, this.capabilityResponse(opened.payload as CapabilityQueryPayload)));
      case MessageType.ACK:
      case MessageType.CAPABILITY_RESPONSE:
        return this.answered(opened, cause, undefined);
      case MessageType.NACK:
        this.options.logger.warn({ ...messageLogFields(header), reply_to: header.replyTo }, "peer refused a message (p2p:nack)");
        return this.answered(opened, cause, undefined);
      default: {
        // registry:* messages are RegistryService's and a2n:* GroupService's, never P2PService.Send's.
        if (!info.wireName.startsWith("p2p:")) {
          const service = info.wireName.startsWith("a2n:") ? "GroupService" : "RegistryService";
          throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `${info.wireName} is sent to ${service}, not to P2PService.Send`);
        }
        // confirm, reject, status, complete, failed, need_info, need_human: the executor's words,
        // welcome only as callbacks for a task this agent requested.
        if (header.taskId && (await this.options.inbox.expects(opened))) return this.callback(opened, cause);
        const task = header.taskId ? await this.options.store.getTask(header.taskId) : undefined;
        // Only the task's requester may learn that it exists.
        if (task === undefined || task.requester.agentId !== header.sender!.agentId) throw taskNotFound(header.taskId);
        throw protocolError(ErrorCode.PERMISSION_DENIED, `${info.wireName} is sent by a task's executor, and this agent is the executor of task ${task.taskId}`);
      }
    }
  }

  /** Keeps an event pushed for a task this agent requested, and acknowledges it. */
  private async callback(opened: OpenedEnvelope, cause: Cause): Promise<SendOutcome> {
    const { ack, state } = await this.options.inbox.receive(opened);
    return { ...(await this.answered(opened, cause, this.options.recorder.reply(opened.header, MessageType.ACK, ack))), state };
  }

  private async onTaskAck(opened: OpenedEnvelope, cause: Cause): Promise<SendOutcome> {
    const { header } = opened;
    const task = await this.steering.requireOwnTask(header);
    if (!isTerminal(task.state)) return this.steering.acknowledge(header, task, cause);
    // The requester acknowledges the outcome: nothing changes.
    const reply = this.options.recorder.reply(header, MessageType.ACK, create(AckPayloadSchema, { acknowledgedMessageId: header.messageId, message: `task is ${stateName(task.state)}` }));
    return this.answered(opened, cause, reply, task);
  }

  private capabilityResponse(query: CapabilityQueryPayload) {
    const capabilities = this.options.capabilities.getCapabilities();
    const wanted = new Set(query.taskTypes);
    return create(CapabilityResponsePayloadSchema, {
      capabilities: {
        ...capabilities,
        supportedTaskTypes: wanted.size === 0 ? capabilities.supportedTaskTypes : capabilities.supportedTaskTypes.filter((t) => wanted.has(t.type)),
      },
      interfaces: query.includeInterfaces ? this.options.capabilities.getSupportedInterfaces() : [],
    });
  }

  // ── waiting and shutdown ───────────────────────────────────────────────

  /** A signed heartbeat for a peer (also sent on idle Watch streams, carrying the task's ids). */
  sealHeartbeat(receiver: TaskRecord["requester"], carried?: TaskRecord["carried"]): Promise<StoredReply> {
    return this.options.recorder.sealHeartbeat(receiver, this.draining, carried);
  }

  /**
   * Resolves with the task once it is terminal or waits for its requester,
   * or when `waitMs` has passed, or when any of `signals` aborts (listened to
   * one by one: AbortSignal.any per call costs more than the rest of a wait).
   * Events committed by any instance count.
   */
  async waitForOutcome(taskId: string, waitMs: number, signals: ReadonlyArray<AbortSignal | Abortable> = []): Promise<TaskRecord | undefined> {
    const settled = (task: TaskRecord | undefined) => task === undefined || isTerminal(task.state) || WAITING_STATES.has(task.state);
    const { store, bus } = this.options;
    const first = await store.getTask(taskId);
    if (settled(first) || waitMs <= 0) return first;
    return new Promise((resolve) => {
      let done = false;
      let latest = first;
      const finish = (task?: TaskRecord) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        unsubscribe();
        for (const stop of listening) stop();
        if (task !== undefined) resolve(task);
        else store.getTask(taskId).then(resolve, () => resolve(latest));
      };
      const look = () =>
        void store.getTask(taskId).then((task) => {
          latest = task ?? latest;
          if (settled(task)) finish(task);
        }, () => undefined);
      const unsubscribe = bus.subscribe(taskId, (change) => {
        if (change.task === undefined) return look();
        latest = change.task;
        if (settled(change.task)) finish(change.task);
      });
      const timer = setTimeout(() => finish(), waitMs);
      // The server's draining signal is shared by every waiting call: onAbort keeps that cheap.
      const listening: Array<() => void> = [];
      for (const signal of signals) {
        if (done) return; // an aborted one finished the wait at once
        listening.push(onAbort(signal, () => finish()));
      }
      if (done) return;
      // It may have settled between the first read and the subscription.
      look();
    });
  }

  /** Refuses new tasks; the runner stops the runs (see ExecutionRunner.shutdown). */
  async shutdown(): Promise<void> {
    this.draining = true;
    await this.options.runner.shutdown();
  }

  get isDraining(): boolean {
    return this.draining;
  }
}


