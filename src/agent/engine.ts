// The executor side of the P2P protocol: takes verified inbound messages,
// checks each against the task's state and the sender's role, records every
// state change as a signed event through the store, and runs handlers.
import { create, type JsonObject, type JsonValue, type Message } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { randomUUID } from "node:crypto";
import { MessageType, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  AckPayloadSchema,
  AgentStatus,
  CapabilityResponsePayloadSchema,
  DecisionAction,
  HeartbeatPayloadSchema,
  TaskAckPayloadSchema,
  TaskCompletePayloadSchema,
  TaskConfirmPayloadSchema,
  TaskErrorSchema,
  TaskFailedPayloadSchema,
  TaskNeedHumanPayloadSchema,
  TaskNeedInfoPayloadSchema,
  TaskRejectPayloadSchema,
  TaskState,
  TaskStatusUpdatePayloadSchema,
  type CapabilityQueryPayload,
  type HumanDecisionPayload,
  type TaskCancelPayload,
  type TaskInfoProvidedPayload,
  type TaskRequestPayload,
} from "../../gen/synapse/v1/payloads_pb.js";
import { Code } from "@connectrpc/connect";
import type { CapabilitiesProvider } from "../capabilities/provider.js";
import type { P2PConfig } from "../capabilities/defaults.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import { seal } from "../envelope/seal.js";
import type { Logger } from "../log.js";
import { protocolError, taskNotFound } from "../protocol/errors.js";
import { toValue } from "../protocol/json-values.js";
import { wireName } from "../protocol/message-types.js";
import { allowedMessageTypes, isTerminal, stateName, TERMINAL_STATES, transition, WAITING_STATES } from "../protocol/state-machine.js";
import { StoreConflictError, type PartyRecord, type Store, type StoredEvent, type StoredReply, type TaskPatch, type TaskRecord } from "../store/store.js";
import { admissionOutcome, type Admission } from "./admission.js";
import { validCallbackUrl, type CallbackSender } from "./callbacks.js";
import type { TaskEventBus } from "./events.js";
import { Execution, type ExecutionHost, type FailureReport, type FinishedResult } from "./execution.js";
import type { HumanAnswer, HumanQuestion, MissingFieldSpec, TaskHandler } from "./handler.js";
import { TaskFailure } from "./handler.js";
import type { AgentIdentity } from "./identity.js";
import type { CallbackInbox } from "./inbox.js";
import { toMissingField } from "./missing-fields.js";
import type { TaskSchemas } from "./schemas.js";

export interface EngineOptions {
  identity: AgentIdentity;
  /** Pushes events of tasks that asked for callbacks. */
  callbacks: CallbackSender;
  /** Takes events pushed for tasks this agent requested. */
  inbox: CallbackInbox;
  capabilities: CapabilitiesProvider;
  handlers: ReadonlyMap<string, TaskHandler>;
  schemas: TaskSchemas;
  store: Store;
  bus: TaskEventBus;
  config: P2PConfig;
  logger: Logger;
  clockSkewMs: number;
  now?: () => number;
}

export interface SendOutcome {
  reply?: StoredReply;
  task?: TaskRecord;
}

/** States in which a task holds one of the max_concurrent_tasks slots. */
const ACTIVE_STATES = Object.values(TaskState).filter(
  (state): state is TaskState => typeof state === "number" && state !== TaskState.UNSPECIFIED && state !== TaskState.IDLE && !TERMINAL_STATES.has(state),
);

interface Waiter<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
}

const MAX_COMMIT_ATTEMPTS = 8;
const PRUNE_INTERVAL_MS = 60_000;
const RETRY_AFTER_SECONDS = 5;

export class TaskEngine implements ExecutionHost {
  private readonly now: () => number;
  private readonly executions = new Map<string, Execution>();
  private readonly infoWaiters = new Map<string, Waiter<JsonObject>>();
  private readonly humanWaiters = new Map<string, Waiter<HumanAnswer>>();
  private readonly inflight = new Map<string, Promise<SendOutcome>>();
  private admissionQueue: Promise<unknown> = Promise.resolve();
  private reserved = 0;
  private draining = false;

  private readonly pruner: NodeJS.Timeout;

  constructor(private readonly options: EngineOptions) {
    this.now = options.now ?? Date.now;
    // Remembered message ids are only needed until those messages would be refused as expired anyway.
    this.pruner = setInterval(() => {
      options.store.pruneMessages(this.now()).catch((error: unknown) => options.logger.warn({ err: error }, "pruning seen messages failed"));
    }, PRUNE_INTERVAL_MS);
    this.pruner.unref();
  }

  private get self(): PartyRecord {
    const { identity } = this.options;
    return { agentId: identity.agentId, systemId: identity.systemId, keyId: identity.key.keyId };
  }

  // ── inbound ────────────────────────────────────────────────────────────

  /**
   * Handles one verified message. An exact re-delivery gets the first
   * reply again and has no second effect; another envelope reusing a
   * message id is refused.
   */
  async receive(opened: OpenedEnvelope): Promise<SendOutcome> {
    const { header } = opened;
    const sender = header.sender!.agentId;
    const expiresAtMs = header.expiresAt ? Number(header.expiresAt.seconds) * 1000 : this.now() + this.options.clockSkewMs;
    const existing = await this.options.store.rememberMessage({
      messageId: header.messageId,
      senderAgentId: sender,
      digest: opened.digest,
      keepUntilMs: expiresAtMs + this.options.clockSkewMs,
      taskId: header.taskId || undefined,
    });
    if (existing !== undefined) {
      if (existing.digest !== opened.digest || existing.senderAgentId !== sender) {
        throw protocolError(ErrorCode.REPLAY_DETECTED, `message id ${header.messageId} was already used by another message`);
      }
      const pending = this.inflight.get(header.messageId);
      if (pending) return pending;
      const seen = (await this.options.store.getMessage(header.messageId)) ?? existing;
      return { reply: seen.reply, task: seen.taskId ? await this.options.store.getTask(seen.taskId) : undefined };
    }
    const work = this.dispatch(opened);
    this.inflight.set(header.messageId, work);
    try {
      const outcome = await work;
      await this.options.store.completeMessage(header.messageId, outcome.reply, outcome.task?.taskId);
      return outcome;
    } catch (error) {
      // Refused: nothing happened, so the same message may be sent again later.
      await this.options.store.forgetMessage(header.messageId);
      throw error;
    } finally {
      this.inflight.delete(header.messageId);
    }
  }

  private async dispatch(opened: OpenedEnvelope): Promise<SendOutcome> {
    const { header, info } = opened;
    switch (header.messageType) {
      case MessageType.TASK_REQUEST:
        return this.onRequest(header, opened.payload as TaskRequestPayload);
      case MessageType.TASK_CANCEL:
        return this.onCancel(header, opened.payload as TaskCancelPayload);
      case MessageType.TASK_INFO_PROVIDED:
        return this.onInfoProvided(header, opened.payload as TaskInfoProvidedPayload);
      case MessageType.HUMAN_DECISION:
        return this.onDecision(header, opened.payload as HumanDecisionPayload);
      case MessageType.TASK_ACK:
        return this.onTaskAck(header);
      case MessageType.HEARTBEAT:
        return { reply: await this.reply(header, MessageType.HEARTBEAT, await this.heartbeatPayload()) };
      case MessageType.CAPABILITY_QUERY:
        return { reply: await this.reply(header, MessageType.CAPABILITY_RESPONSE, this.capabilityResponse(opened.payload as CapabilityQueryPayload)) };
      case MessageType.ACK:
      case MessageType.CAPABILITY_RESPONSE:
        return {};
      case MessageType.NACK:
        this.options.logger.warn({ from: header.sender?.agentId, reply_to: header.replyTo }, "peer refused a message (p2p:nack)");
        return {};
      default: {
        // registry:* messages are RegistryService's, never P2PService.Send's.
        if (!info.wireName.startsWith("p2p:")) {
          throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `${info.wireName} is sent to RegistryService, not to P2PService.Send`);
        }
        // confirm, reject, status, complete, failed, need_info, need_human: the executor's words,
        // welcome only as callbacks for a task this agent requested.
        if (header.taskId && (await this.options.inbox.expects(opened))) {
          return { reply: await this.reply(header, MessageType.ACK, await this.options.inbox.receive(opened)) };
        }
        const task = header.taskId ? await this.options.store.getTask(header.taskId) : undefined;
        // Only the task's requester may learn that it exists.
        if (task === undefined || task.requester.agentId !== header.sender!.agentId) throw taskNotFound(header.taskId);
        throw protocolError(ErrorCode.PERMISSION_DENIED, `${info.wireName} is sent by a task's executor, and this agent is the executor of task ${task.taskId}`);
      }
    }
  }

  private async requireOwnTask(header: Header): Promise<TaskRecord> {
    const task = await this.options.store.getTask(header.taskId);
    // A task of another requester does not exist as far as this sender can tell: the same answer as for no task.
    if (task === undefined || task.requester.agentId !== header.sender!.agentId) throw taskNotFound(header.taskId);
    return task;
  }

  private refuseTransition(task: TaskRecord, type: MessageType): never {
    const details = {
      task_id: task.taskId,
      state: `TASK_STATE_${TaskState[task.state]}`,
      message_type: `MESSAGE_TYPE_${MessageType[type]}`,
      allowed: allowedMessageTypes(task.state).map((allowed) => `MESSAGE_TYPE_${MessageType[allowed]}`),
    };
    if (isTerminal(task.state)) {
      throw protocolError(ErrorCode.TASK_ALREADY_COMPLETED, `task ${task.taskId} is ${stateName(task.state)}; ${wireName(type)} changes nothing`, { details });
    }
    throw protocolError(ErrorCode.ILLEGAL_TRANSITION, `${wireName(type)} is not allowed while task ${task.taskId} is ${stateName(task.state)}`, { details });
  }

  private async onRequest(header: Header, request: TaskRequestPayload): Promise<SendOutcome> {
    const spec = request.task;
    if (spec === undefined || spec.type === "") throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "payload.task with a type is required");
    if (spec.id !== header.taskId) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "payload.task.id must equal header.task_id");
    if (request.callbackUrl && !validCallbackUrl(request.callbackUrl)) {
      throw protocolError(ErrorCode.INVALID_PARAMS, `callback_url ${JSON.stringify(request.callbackUrl)} is not an http or https URL`);
    }
    const requester = { agentId: header.sender!.agentId, systemId: header.sender!.systemId, keyId: header.sender!.keyId };
    if (header.idempotencyKey) {
      const earlier = await this.options.store.findTaskByIdempotencyKey(requester.agentId, header.idempotencyKey);
      if (earlier !== undefined) {
        const original = await this.options.store.getMessage(earlier.requestMessageId);
        return { reply: original?.reply, task: earlier };
      }
    }
    if (this.draining) throw protocolError(ErrorCode.AGENT_NOT_READY, "the agent is shutting down", { retryAfterSeconds: RETRY_AFTER_SECONDS });
    await this.reserveSlot();
    try {
      if (await this.options.store.getTask(spec.id)) {
        throw protocolError(ErrorCode.INVALID_PARAMS, `task id ${spec.id} is already in use`, { status: Code.AlreadyExists });
      }
      const payload = spec.payload ?? {};
      const admission = await admissionOutcome(this.admissionContext(), spec.type, payload, requester, spec.deadline, spec.id);
      const nowMs = this.now();
      const base: Omit<TaskRecord, "version" | "lastSequence"> = {
        taskId: spec.id,
        taskType: spec.type,
        requester,
        executor: this.self,
        state: TaskState.PENDING,
        progress: 0,
        statusMessage: "",
        createdAtMs: nowMs,
        updatedAtMs: nowMs,
        request,
        payload,
        idempotencyKey: header.idempotencyKey,
        requestMessageId: header.messageId,
      };
      const { type, message, patch } = this.admissionEvent(base, admission);
      const step = transition(TaskState.PENDING, type);
      if (!step.allowed) throw protocolError(ErrorCode.INTERNAL, "admission produced an illegal first event");
      const event = this.sealEvent(base, type, message, 1, header.messageId);
      const task = await this.options.store.createTask({ ...base, ...patch, state: step.next }, event);
      this.options.bus.publish(event, task);
      if (request.callbackUrl) this.options.callbacks.track(task.taskId, request.callbackUrl);
      if (task.state === TaskState.CONFIRMED) this.startExecution(task);
      return { reply: event, task };
    } finally {
      this.reserved--;
    }
  }

  /** Holds a concurrency slot for a task being admitted, or refuses with 4004. */
  private reserveSlot(): Promise<void> {
    const attempt = this.admissionQueue.then(async () => {
      const active = (await this.options.store.countTasks(ACTIVE_STATES)) + this.reserved;
      const max = this.options.capabilities.getCapabilities().maxConcurrentTasks;
      if (active >= max) {
        throw protocolError(ErrorCode.CONCURRENCY_LIMIT, `${max} tasks are running, the most this agent takes (max_concurrent_tasks)`, {
          retryAfterSeconds: RETRY_AFTER_SECONDS,
          details: { max_concurrent_tasks: max },
        });
      }
      this.reserved++;
    });
    this.admissionQueue = attempt.catch(() => undefined);
    return attempt;
  }

  private admissionContext() {
    return { handlers: this.options.handlers, schemas: this.options.schemas, now: this.now };
  }

  /** The first event for an admission decision, and what it changes. */
  private admissionEvent(task: Pick<TaskRecord, "taskId" | "taskType">, admission: Admission): { type: MessageType; message: Message; patch: TaskPatch } {
    switch (admission.kind) {
      case "accept": {
        const message = create(TaskConfirmPayloadSchema, {
          taskId: task.taskId,
          confirmed: true,
          estimatedDurationSeconds: 1,
          capabilitiesUsed: this.options.capabilities.findTaskType(task.taskType)?.capabilities ?? [],
          constraints: { maxRetries: 0, fallbackEnabled: false },
        });
        return { type: MessageType.TASK_CONFIRM, message, patch: { statusMessage: "confirmed" } };
      }
      case "need_info": {
        const message = create(TaskNeedInfoPayloadSchema, {
          taskId: task.taskId,
          missingFields: admission.fields.map(toMissingField),
          question: admission.question ?? "",
        });
        return { type: MessageType.TASK_NEED_INFO, message, patch: { pendingInfo: message, statusMessage: message.question } };
      }
      case "reject": {
        const message = create(TaskRejectPayloadSchema, {
          taskId: task.taskId,
          reason: { code: admission.code, message: admission.message, details: admission.details === undefined ? undefined : toValue(admission.details) },
          alternatives: { suggestedAgentId: admission.suggestedAgentId ?? "", retryAfterSeconds: admission.retryAfterSeconds ?? 0 },
        });
        return { type: MessageType.TASK_REJECT, message, patch: { rejection: message, statusMessage: admission.message } };
      }
    }
  }

  private async onCancel(header: Header, cancel: TaskCancelPayload): Promise<SendOutcome> {
    const task = await this.requireOwnTask(header);
    if (!transition(task.state, MessageType.TASK_CANCEL).allowed) this.refuseTransition(task, MessageType.TASK_CANCEL);
    const reason = cancel.reason || "cancelled by the requester";
    const recorded = await this.record(task.taskId, MessageType.TASK_CANCEL, undefined, MessageType.TASK_ACK, (current) => ({
      message: create(TaskAckPayloadSchema, {
        taskId: current.taskId,
        acknowledgedMessageId: header.messageId,
        acknowledgedType: MessageType.TASK_CANCEL,
        state: TaskState.CANCELLED,
        message: reason,
      }),
      patch: {
        error: create(TaskErrorSchema, { code: ErrorCode.TASK_CANCELLED, message: reason }),
        statusMessage: reason,
        pendingInfo: undefined,
        pendingDecision: undefined,
      },
    }), header.messageId);
    if (recorded === undefined) this.refuseTransition((await this.options.store.getTask(task.taskId))!, MessageType.TASK_CANCEL);
    this.endExecution(task.taskId, undefined, "cancelled");
    return { reply: recorded.event, task: recorded.task };
  }

  private async onInfoProvided(header: Header, provided: TaskInfoProvidedPayload): Promise<SendOutcome> {
    const task = await this.requireOwnTask(header);
    if (!transition(task.state, MessageType.TASK_INFO_PROVIDED).allowed) this.refuseTransition(task, MessageType.TASK_INFO_PROVIDED);
    const fields = provided.fields ?? {};
    const recorded = await this.record(task.taskId, MessageType.TASK_INFO_PROVIDED, undefined, MessageType.TASK_ACK, (current) => ({
      message: create(TaskAckPayloadSchema, {
        taskId: current.taskId,
        acknowledgedMessageId: header.messageId,
        acknowledgedType: MessageType.TASK_INFO_PROVIDED,
        state: TaskState.INFO_PROVIDED,
        message: `received ${Object.keys(fields).join(", ") || "no fields"}`,
      }),
      patch: { payload: { ...current.payload, ...fields }, pendingInfo: undefined, statusMessage: "information provided" },
    }), header.messageId);
    if (recorded === undefined) this.refuseTransition((await this.options.store.getTask(task.taskId))!, MessageType.TASK_INFO_PROVIDED);
    const waiter = this.infoWaiters.get(task.taskId);
    if (waiter) {
      // The running handler asked: it goes on with the answer.
      this.infoWaiters.delete(task.taskId);
      waiter.resolve(fields);
    } else {
      // Asked before confirming: decide again with the completed payload.
      await this.readmit(recorded.task);
    }
    return { reply: recorded.event, task: (await this.options.store.getTask(task.taskId)) ?? recorded.task };
  }

  private async readmit(task: TaskRecord): Promise<void> {
    const admission = await admissionOutcome(this.admissionContext(), task.taskType, task.payload, task.requester, task.request.task?.deadline, task.taskId);
    const recorded = await this.record(task.taskId, undefined, undefined, undefined, (current) => {
      const { type, message, patch } = this.admissionEvent(current, admission);
      return { type, message, patch };
    });
    if (recorded?.task.state === TaskState.CONFIRMED) this.startExecution(recorded.task);
  }

  private async onDecision(header: Header, decision: HumanDecisionPayload): Promise<SendOutcome> {
    const task = await this.requireOwnTask(header);
    const action = decision.decision?.action ?? DecisionAction.UNSPECIFIED;
    if (action === DecisionAction.UNSPECIFIED) {
      throw protocolError(ErrorCode.INVALID_PARAMS, "decision.action must be approve, reject or modify");
    }
    if (!transition(task.state, MessageType.HUMAN_DECISION, action).allowed) this.refuseTransition(task, MessageType.HUMAN_DECISION);
    const expected = task.pendingDecision?.decisionId;
    if (decision.decisionId && expected && decision.decisionId !== expected) {
      throw protocolError(ErrorCode.INVALID_PARAMS, `decision_id ${decision.decisionId} does not answer the pending decision ${expected}`);
    }
    const approved = action !== DecisionAction.REJECT;
    const fields = { ...(decision.decision?.approvedFields ?? {}), ...(decision.decision?.modifiedFields ?? {}) };
    const recorded = await this.record(task.taskId, MessageType.HUMAN_DECISION, action, MessageType.TASK_ACK, (current) => ({
      message: create(TaskAckPayloadSchema, {
        taskId: current.taskId,
        acknowledgedMessageId: header.messageId,
        acknowledgedType: MessageType.HUMAN_DECISION,
        state: approved ? TaskState.HUMAN_APPROVED : TaskState.HUMAN_REJECTED,
        message: approved ? `${DecisionAction[action].toLowerCase()}d by ${decision.decidedBy?.userName || decision.decidedBy?.userId || "a human"}` : decision.decision?.rejectionReason || "rejected",
      }),
      patch: {
        pendingDecision: undefined,
        payload: approved ? { ...current.payload, ...fields } : current.payload,
        statusMessage: approved ? "approved" : "rejected by a human",
      },
    }), header.messageId);
    if (recorded === undefined) this.refuseTransition((await this.options.store.getTask(task.taskId))!, MessageType.HUMAN_DECISION);
    const waiter = this.humanWaiters.get(task.taskId);
    this.humanWaiters.delete(task.taskId);
    if (approved) {
      waiter?.resolve({
        action: action === DecisionAction.MODIFY ? "modify" : "approve",
        fields,
        notes: decision.notes,
        decidedBy: { userId: decision.decidedBy?.userId ?? "", userName: decision.decidedBy?.userName ?? "", role: decision.decidedBy?.role ?? "" },
      });
    } else {
      // A rejection ends the task: it fails with human_rejected.
      const reason = decision.decision?.rejectionReason || "a human rejected the task";
      await this.fail(task.taskId, { code: ErrorCode.HUMAN_REJECTED, message: reason, recoverable: false });
      waiter?.reject(new TaskFailure(ErrorCode.HUMAN_REJECTED, reason));
      this.endExecution(task.taskId, undefined, "rejected by a human");
    }
    return { reply: recorded.event, task: (await this.options.store.getTask(task.taskId)) ?? recorded.task };
  }

  private async onTaskAck(header: Header): Promise<SendOutcome> {
    const task = await this.requireOwnTask(header);
    if (isTerminal(task.state)) {
      // The requester acknowledges the outcome: nothing changes.
      const reply = await this.reply(header, MessageType.ACK, create(AckPayloadSchema, { acknowledgedMessageId: header.messageId, message: `task is ${stateName(task.state)}` }));
      return { reply, task };
    }
    if (!transition(task.state, MessageType.TASK_ACK).allowed) this.refuseTransition(task, MessageType.TASK_ACK);
    const recorded = await this.record(task.taskId, MessageType.TASK_ACK, undefined, MessageType.TASK_ACK, (current) => ({
      message: create(TaskAckPayloadSchema, {
        taskId: current.taskId,
        acknowledgedMessageId: header.messageId,
        acknowledgedType: MessageType.TASK_ACK,
        state: TaskState.HUMAN_DECIDING,
        message: "a human is deciding",
      }),
      patch: { statusMessage: "a human is deciding" },
    }), header.messageId);
    if (recorded === undefined) this.refuseTransition((await this.options.store.getTask(task.taskId))!, MessageType.TASK_ACK);
    return { reply: recorded.event, task: recorded.task };
  }

  // ── recording ──────────────────────────────────────────────────────────

  /**
   * Applies a transition and records its event in one commit, retrying on
   * concurrent change. `apply` is the message whose transition is applied
   * (an inbound one for acknowledgements), `eventType` the event recorded;
   * both default to the type `build` returns. Returns undefined when the
   * task's state no longer allows the transition.
   */
  private async record(
    taskId: string,
    apply: MessageType | undefined,
    action: DecisionAction | undefined,
    eventType: MessageType | undefined,
    build: (task: TaskRecord) => { type?: MessageType; message: Message; patch: TaskPatch },
    replyTo?: string,
  ): Promise<{ task: TaskRecord; event: StoredEvent } | undefined> {
    for (let attempt = 0; attempt < MAX_COMMIT_ATTEMPTS; attempt++) {
      const current = await this.options.store.getTask(taskId);
      if (current === undefined) return undefined;
      const built = build(current);
      const type = eventType ?? built.type!;
      const step = transition(current.state, apply ?? type, action);
      if (!step.allowed) return undefined;
      const event = this.sealEvent(current, type, built.message, current.lastSequence + 1, replyTo);
      try {
        const task = await this.options.store.commit(taskId, current.version, { ...built.patch, state: step.next, updatedAtMs: this.now() }, event);
        this.options.bus.publish(event, task);
        return { task, event };
      } catch (error) {
        if (!(error instanceof StoreConflictError)) throw error;
      }
    }
    throw protocolError(ErrorCode.INTERNAL, `task ${taskId} kept changing; try again`);
  }

  private sealEvent(task: Pick<TaskRecord, "taskId" | "requester">, type: MessageType, message: Message, sequence: number, replyTo?: string): StoredEvent {
    const { envelope, header } = seal(
      {
        messageType: type,
        payload: message,
        sender: { agentId: this.self.agentId, systemId: this.self.systemId },
        receiver: task.requester,
        taskId: task.taskId,
        replyTo,
        sequence: BigInt(sequence),
        sentAtMs: this.now(),
      },
      this.options.identity.key,
    );
    return { taskId: task.taskId, sequence, envelope, header, payload: message };
  }

  /** A signed reply that is not a task event. */
  private async reply(to: Header, type: MessageType, message: Message): Promise<StoredReply> {
    const { envelope, header } = seal(
      {
        messageType: type,
        payload: message,
        sender: { agentId: this.self.agentId, systemId: this.self.systemId },
        receiver: { agentId: to.sender!.agentId, systemId: to.sender!.systemId },
        taskId: to.taskId,
        replyTo: to.messageId,
        correlationId: to.correlationId,
        sentAtMs: this.now(),
      },
      this.options.identity.key,
    );
    return { envelope, header, payload: message };
  }

  /** A signed heartbeat for a peer (also sent on idle Watch streams). */
  async heartbeatPayload() {
    const active = await this.options.store.countTasks(ACTIVE_STATES);
    const max = this.options.capabilities.getCapabilities().maxConcurrentTasks;
    return create(HeartbeatPayloadSchema, {
      status: this.draining ? AgentStatus.DRAINING : active >= max ? AgentStatus.BUSY : AgentStatus.READY,
      activeTasks: active,
      maxConcurrentTasks: max,
    });
  }

  async sealHeartbeat(receiver: PartyRecord): Promise<StoredReply> {
    const message = await this.heartbeatPayload();
    const { envelope, header } = seal(
      { messageType: MessageType.HEARTBEAT, payload: message, sender: this.self, receiver, sentAtMs: this.now() },
      this.options.identity.key,
    );
    return { envelope, header, payload: message };
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

  // ── execution ──────────────────────────────────────────────────────────

  private startExecution(task: TaskRecord): void {
    const handler = this.options.handlers.get(task.taskType);
    if (handler === undefined || this.executions.has(task.taskId)) return;
    const caps = this.options.capabilities.getCapabilities();
    const execution = new Execution(
      { taskId: task.taskId, taskType: task.taskType, payload: task.payload, requester: { agentId: task.requester.agentId, systemId: task.requester.systemId } },
      handler,
      this,
      this.options.schemas,
      {
        taskTimeoutMs: this.options.config.taskTimeoutMs,
        maxTaskDurationMs: caps.maxTaskDurationSeconds * 1000,
        // Events are carried with their decoded view, and a waited Send also returns the task: keep inline results to a quarter of a message.
        maxInlineOutputBytes: Math.floor(Number(caps.maxFileSize) / 4),
        maxStreamBytes: 1024 * 1024 * 1024,
      },
      this.options.logger,
    );
    this.executions.set(task.taskId, execution);
    execution
      .run()
      .catch((error: unknown) => this.options.logger.error({ err: error, task_id: task.taskId }, "execution failed unexpectedly"))
      .finally(() => this.executions.delete(task.taskId));
  }

  private endExecution(taskId: string, failure: FailureReport | undefined, why: string): void {
    this.executions.get(taskId)?.stop(failure, why);
    const stopped = new Error(`task ${why}`);
    this.infoWaiters.get(taskId)?.reject(stopped);
    this.infoWaiters.delete(taskId);
    this.humanWaiters.get(taskId)?.reject(stopped);
    this.humanWaiters.delete(taskId);
  }

  async progress(taskId: string, percent: number, message: string, intermediate?: JsonValue): Promise<void> {
    await this.record(taskId, undefined, undefined, undefined, (current) => ({
      type: MessageType.TASK_STATUS_UPDATE,
      message: create(TaskStatusUpdatePayloadSchema, {
        taskId,
        status: TaskState.EXECUTING,
        progress: percent,
        message,
        intermediateResult: intermediate === undefined ? undefined : toValue(intermediate),
      }),
      patch: { progress: Math.max(current.progress, percent), statusMessage: message },
    }));
  }

  async currentPayload(taskId: string): Promise<JsonObject> {
    return (await this.options.store.getTask(taskId))?.payload ?? {};
  }

  askForInfo(taskId: string, fields: MissingFieldSpec[], question: string | undefined, signal: AbortSignal): Promise<JsonObject> {
    return new Promise<JsonObject>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      this.infoWaiters.set(taskId, { resolve, reject });
      const message = create(TaskNeedInfoPayloadSchema, { taskId, missingFields: fields.map(toMissingField), question: question ?? "" });
      this.record(taskId, undefined, undefined, undefined, () => ({
        type: MessageType.TASK_NEED_INFO,
        message,
        patch: { pendingInfo: message, statusMessage: question ?? "waiting for information" },
      })).then((recorded) => {
        if (recorded === undefined) {
          this.infoWaiters.delete(taskId);
          reject(new Error("the task can no longer ask for information"));
        }
      }, reject);
    });
  }

  askHuman(taskId: string, question: HumanQuestion, signal: AbortSignal): Promise<HumanAnswer> {
    return new Promise<HumanAnswer>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      let deadlineTimer: NodeJS.Timeout | undefined;
      const settle = {
        resolve: (answer: HumanAnswer) => {
          clearTimeout(deadlineTimer);
          resolve(answer);
        },
        reject: (error: unknown) => {
          clearTimeout(deadlineTimer);
          reject(error);
        },
      };
      this.humanWaiters.set(taskId, settle);
      this.record(taskId, undefined, undefined, undefined, (current) => {
        const message = create(TaskNeedHumanPayloadSchema, {
          taskId,
          decisionId: randomUUID(),
          reason: { code: question.code, message: question.message },
          context: { taskSummary: question.taskSummary ?? "", currentProgress: current.progress, blockedReason: question.blockedReason ?? "" },
          options: (question.options ?? []).map((option) => ({
            field: option.field,
            value: toValue(option.value),
            prosCons: option.prosCons ?? "",
            confidence: option.confidence ?? 0,
          })),
          escalationLevel: question.escalationLevel ?? 1,
          deadline: question.deadline ? timestampFromMs(question.deadline.getTime()) : undefined,
        });
        return { type: MessageType.TASK_NEED_HUMAN, message, patch: { pendingDecision: message, statusMessage: question.message } };
      }).then((recorded) => {
        if (recorded === undefined) {
          this.humanWaiters.delete(taskId);
          return settle.reject(new Error("the task can no longer ask for a decision"));
        }
        if (question.deadline) {
          const wait = Math.max(0, question.deadline.getTime() - this.now());
          deadlineTimer = setTimeout(() => {
            if (this.humanWaiters.get(taskId) !== settle) return;
            this.humanWaiters.delete(taskId);
            const failure = { code: ErrorCode.EXECUTION_TIMEOUT, message: "no human decision before the deadline", recoverable: true };
            this.executions.get(taskId)?.stop(failure, "decision deadline passed");
            settle.reject(new TaskFailure(failure.code, failure.message, true));
          }, wait);
        }
      }, settle.reject);
    });
  }

  async complete(taskId: string, result: FinishedResult): Promise<void> {
    if (result.stream) await this.options.store.putResult(taskId, result.stream.bytes);
    await this.record(taskId, undefined, undefined, undefined, () => {
      const stream = result.stream
        ? { streamId: taskId, totalSize: BigInt(result.stream.bytes.byteLength), sha256: result.stream.sha256, contentType: result.stream.contentType }
        : undefined;
      const message = create(TaskCompletePayloadSchema, {
        taskId,
        result: { outputType: result.outputType, output: result.output === undefined ? undefined : toValue(result.output), metadata: result.metadata, stream },
        summary: result.summary,
      });
      return {
        type: MessageType.TASK_COMPLETE,
        message,
        patch: {
          result: message.result,
          progress: 100,
          statusMessage: result.summary || "completed",
          resultStream: result.stream ? { contentType: result.stream.contentType, totalSize: result.stream.bytes.byteLength, sha256: result.stream.sha256 } : undefined,
        },
      };
    });
  }

  async fail(taskId: string, failure: FailureReport): Promise<void> {
    await this.record(taskId, undefined, undefined, undefined, () => {
      const message = create(TaskFailedPayloadSchema, {
        taskId,
        error: { code: failure.code, message: failure.message, recoverable: failure.recoverable, details: failure.details === undefined ? undefined : toValue(failure.details) },
      });
      return { type: MessageType.TASK_FAILED, message, patch: { error: message.error, statusMessage: failure.message, pendingInfo: undefined, pendingDecision: undefined } };
    });
  }

  // ── waiting and shutdown ───────────────────────────────────────────────

  /** Resolves with the task once it is terminal or waits for its requester, or when `waitMs` has passed. */
  async waitForOutcome(taskId: string, waitMs: number, signal?: AbortSignal): Promise<TaskRecord | undefined> {
    const settled = (task: TaskRecord | undefined) => task === undefined || isTerminal(task.state) || WAITING_STATES.has(task.state);
    let task = await this.options.store.getTask(taskId);
    if (settled(task) || waitMs <= 0) return task;
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener("abort", done);
        this.options.store.getTask(taskId).then(resolve, () => resolve(task));
      };
      const unsubscribe = this.options.bus.subscribe(taskId, (_event, latest) => {
        task = latest;
        if (settled(latest)) done();
      });
      timer = setTimeout(done, waitMs);
      signal?.addEventListener("abort", done, { once: true });
      // It may have settled between the first read and the subscription.
      this.options.store.getTask(taskId).then((latest) => {
        if (settled(latest)) done();
      }, done);
    });
  }

  /** Refuses new tasks and stops running ones (they fail as agent_not_ready, recoverable). */
  async shutdown(): Promise<void> {
    this.draining = true;
    clearInterval(this.pruner);
    const running = [...this.executions.keys()];
    for (const taskId of running) {
      this.endExecution(taskId, { code: ErrorCode.AGENT_NOT_READY, message: "the agent shut down while the task ran", recoverable: true }, "stopped by shutdown");
    }
    // Tasks waiting for their requester have no execution to stop.
    for (const taskId of [...this.infoWaiters.keys(), ...this.humanWaiters.keys()]) {
      await this.fail(taskId, { code: ErrorCode.AGENT_NOT_READY, message: "the agent shut down while the task waited", recoverable: true });
    }
    await Promise.race([Promise.all(running.map((id) => this.settledExecution(id))), new Promise((resolve) => setTimeout(resolve, 2000))]);
    this.options.callbacks.close();
  }

  private async settledExecution(taskId: string): Promise<void> {
    while (this.executions.has(taskId)) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  get isDraining(): boolean {
    return this.draining;
  }
}
