// The executor side of the P2P protocol: takes verified inbound messages,
// checks each against the task's state and the sender's role, and records
// every state change as a signed event through the store, with the message
// that caused it in the same commit, so that a message is acted on once,
// by whichever instance receives it, before or after a restart.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { MessageType, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  AckPayloadSchema,
  CapabilityResponsePayloadSchema,
  DecisionAction,
  TaskAckPayloadSchema,
  TaskErrorSchema,
  TaskState,
  type CapabilityQueryPayload,
  type HumanDecisionPayload,
  type TaskCancelPayload,
  type TaskInfoProvidedPayload,
  type TaskRequestPayload,
} from "../../gen/synapse/v1/payloads_pb.js";
import type { CapabilitiesProvider } from "../capabilities/provider.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import type { Logger } from "../log.js";
import type { OutboundPolicy } from "../net/outbound-policy.js";
import { protocolError } from "../protocol/errors.js";
import { wireName } from "../protocol/message-types.js";
import { allowedMessageTypes, isTerminal, stateName, transition, WAITING_STATES } from "../protocol/state-machine.js";
import {
  StoreConflictError,
  StoreLimitError,
  type NewTask,
  type SeenMessage,
  type StoredReply,
  type TaskRecord,
  type TaskStore,
} from "../store/store.js";
import { admissionEvent, admissionOutcome } from "./admission.js";
import type { CallbackSender } from "./callbacks.js";
import type { TaskEventBus } from "./events.js";
import type { TaskHandler } from "./handler.js";
import type { CallbackInbox } from "./inbox.js";
import { ACTIVE_STATES, type EventRecorder } from "./recorder.js";
import type { ExecutionRunner } from "./runner.js";
import type { TaskSchemas } from "./schemas.js";

export interface EngineOptions {
  /** Takes events pushed for tasks this agent requested. */
  inbox: CallbackInbox;
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
}

export interface SendOutcome {
  reply?: StoredReply;
  task?: TaskRecord;
}

/** The inbound message as it will be remembered (its reply is added where it is committed). */
type Cause = Omit<SeenMessage, "reply">;

const RETRY_AFTER_SECONDS = 5;

export class TaskEngine {
  private readonly inflight = new Map<string, { digest: string; work: Promise<SendOutcome> }>();
  private draining = false;

  constructor(private readonly options: EngineOptions) {}

  // ── inbound ────────────────────────────────────────────────────────────

  /**
   * Handles one verified message. An exact re-delivery gets the first
   * reply again and has no second effect; another envelope reusing a
   * message id is refused. A refused message is not remembered, so it may
   * be sent again.
   */
  async receive(opened: OpenedEnvelope): Promise<SendOutcome> {
    const { header } = opened;
    const seen = await this.options.store.getMessage("p2p", header.messageId);
    if (seen !== undefined) return this.redelivered(opened, seen);
    const pending = this.inflight.get(header.messageId);
    if (pending !== undefined) {
      if (pending.digest !== opened.digest) throw replayed(header.messageId);
      return pending.work;
    }
    const expiresAtMs = header.expiresAt ? Number(header.expiresAt.seconds) * 1000 : this.options.now() + this.options.clockSkewMs;
    const cause: Cause = {
      scope: "p2p",
      messageId: header.messageId,
      senderAgentId: header.sender!.agentId,
      digest: opened.digest,
      keepUntilMs: expiresAtMs + this.options.clockSkewMs,
      taskId: header.taskId || undefined,
    };
    const work = this.dispatch(opened, cause);
    this.inflight.set(header.messageId, { digest: opened.digest, work });
    try {
      return await work;
    } catch (error) {
      // Another delivery of the same id got there first (here or at another instance).
      if (error instanceof StoreConflictError && error.reason === "message") {
        const first = await this.options.store.getMessage("p2p", header.messageId);
        if (first !== undefined) return this.redelivered(opened, first);
      }
      throw error;
    } finally {
      this.inflight.delete(header.messageId);
    }
  }

  private async redelivered(opened: OpenedEnvelope, seen: SeenMessage): Promise<SendOutcome> {
    if (seen.digest !== opened.digest || seen.senderAgentId !== opened.header.sender!.agentId) throw replayed(opened.header.messageId);
    return { reply: seen.reply, task: seen.taskId ? await this.options.store.getTask(seen.taskId) : undefined };
  }

  /** Remembers a message whose reply is not a task event; a concurrent twin's reply wins. */
  private async answered(opened: OpenedEnvelope, cause: Cause, reply: StoredReply | undefined, task?: TaskRecord): Promise<SendOutcome> {
    const existing = await this.options.store.rememberMessage({ ...cause, reply, taskId: task?.taskId ?? cause.taskId });
    if (existing !== undefined) return this.redelivered(opened, existing);
    return { reply, task };
  }

  private async dispatch(opened: OpenedEnvelope, cause: Cause): Promise<SendOutcome> {
    const { header, info } = opened;
    const { recorder } = this.options;
    switch (header.messageType) {
      case MessageType.TASK_REQUEST:
        return this.onRequest(header, opened.payload as TaskRequestPayload, cause);
      case MessageType.TASK_CANCEL:
        return this.onCancel(header, opened.payload as TaskCancelPayload, cause);
      case MessageType.TASK_INFO_PROVIDED:
        return this.onInfoProvided(header, opened.payload as TaskInfoProvidedPayload, cause);
      case MessageType.HUMAN_DECISION:
        return this.onDecision(header, opened.payload as HumanDecisionPayload, cause);
      case MessageType.TASK_ACK:
        return this.onTaskAck(opened, cause);
      case MessageType.HEARTBEAT:
        return this.answered(opened, cause, recorder.reply(header, MessageType.HEARTBEAT, await recorder.heartbeatPayload(this.draining)));
      case MessageType.CAPABILITY_QUERY:
        return this.answered(opened, cause, recorder.reply(header, MessageType.CAPABILITY_RESPONSE, this.capabilityResponse(opened.payload as CapabilityQueryPayload)));
      case MessageType.ACK:
      case MessageType.CAPABILITY_RESPONSE:
        return this.answered(opened, cause, undefined);
      case MessageType.NACK:
        this.options.logger.warn({ from: header.sender?.agentId, reply_to: header.replyTo }, "peer refused a message (p2p:nack)");
        return this.answered(opened, cause, undefined);
      default: {
        // confirm, reject, status, complete, failed, need_info, need_human: the executor's words,
        // welcome only as callbacks for a task this agent requested.
        if (header.taskId && (await this.options.inbox.expects(opened))) {
          return this.answered(opened, cause, recorder.reply(header, MessageType.ACK, await this.options.inbox.receive(opened)));
        }
        const task = header.taskId ? await this.options.store.getTask(header.taskId) : undefined;
        if (task === undefined) throw protocolError(ErrorCode.TASK_NOT_FOUND, `no task ${header.taskId} here`);
        throw protocolError(ErrorCode.PERMISSION_DENIED, `${info.wireName} is sent by a task's executor, and this agent is the executor of task ${task.taskId}`);
      }
    }
  }

  private async requireOwnTask(header: Header): Promise<TaskRecord> {
    const task = await this.options.store.getTask(header.taskId);
    // A task of another requester does not exist as far as this sender can tell.
    if (task === undefined) throw protocolError(ErrorCode.TASK_NOT_FOUND, `no task ${header.taskId}`);
    if (task.requester.agentId !== header.sender!.agentId) {
      throw protocolError(ErrorCode.PERMISSION_DENIED, `only the requester of task ${task.taskId} may send ${wireName(header.messageType)}`);
    }
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

  /** Refuses with the task's current state after a transition that was no longer allowed. */
  private async refuseNow(taskId: string, type: MessageType): Promise<never> {
    const task = await this.options.store.getTask(taskId);
    if (task === undefined) throw protocolError(ErrorCode.TASK_NOT_FOUND, `no task ${taskId}`);
    this.refuseTransition(task, type);
  }

  private concurrencyLimit(max: number) {
    return protocolError(ErrorCode.CONCURRENCY_LIMIT, `${max} tasks are running, the most this agent takes (max_concurrent_tasks)`, {
      retryAfterSeconds: RETRY_AFTER_SECONDS,
      details: { max_concurrent_tasks: max },
    });
  }

  private async onRequest(header: Header, request: TaskRequestPayload, cause: Cause): Promise<SendOutcome> {
    const { store, capabilities, runner, recorder } = this.options;
    const spec = request.task;
    if (spec === undefined || spec.type === "") throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "payload.task with a type is required");
    if (spec.id !== header.taskId) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "payload.task.id must equal header.task_id");
    // Only what the URL alone decides; the resolved address is checked when each callback connects.
    const callbackProblem = request.callbackUrl ? this.options.outbound.urlProblem(request.callbackUrl) : undefined;
    if (callbackProblem) throw protocolError(ErrorCode.INVALID_PARAMS, `callback_url ${JSON.stringify(request.callbackUrl)} ${callbackProblem}`);
    const requester = { agentId: header.sender!.agentId, systemId: header.sender!.systemId, keyId: header.sender!.keyId };
    if (header.idempotencyKey) {
      const earlier = await store.findTaskByIdempotencyKey(requester.agentId, header.idempotencyKey);
      if (earlier !== undefined) return this.sameAsEarlier(earlier);
    }
    if (this.draining) throw protocolError(ErrorCode.AGENT_NOT_READY, "the agent is shutting down", { retryAfterSeconds: RETRY_AFTER_SECONDS });
    const max = capabilities.getCapabilities().maxConcurrentTasks;
    // A cheap early refusal; the commit below checks again, atomically.
    if ((await store.countTasks(ACTIVE_STATES)) >= max) throw this.concurrencyLimit(max);
    if (await store.getTask(spec.id)) throw taskIdInUse(spec.id);
    const payload = spec.payload ?? {};
    const now = this.options.now();
    const admission = await admissionOutcome(
      { handlers: this.options.handlers, schemas: this.options.schemas, now: this.options.now },
      spec.type,
      payload,
      requester,
      spec.deadline,
      spec.id,
    );
    const base: NewTask = {
      taskId: spec.id,
      taskType: spec.type,
      requester,
      executor: recorder.self,
      state: TaskState.PENDING,
      progress: 0,
      statusMessage: "",
      createdAtMs: now,
      updatedAtMs: now,
      request,
      payload,
      idempotencyKey: header.idempotencyKey,
      requestMessageId: header.messageId,
      executionAttempts: 0,
      startedAtMs: 0,
      leaseOwner: "",
      leaseUntilMs: 0,
      answers: [],
    };
    const { type, message, patch } = admissionEvent(base, admission, capabilities.findTaskType(spec.type)?.capabilities ?? []);
    const step = transition(TaskState.PENDING, type);
    if (!step.allowed) throw protocolError(ErrorCode.INTERNAL, "admission produced an illegal first event");
    // A confirmed task's first run is counted (and leased to this instance) in the commit that admits it.
    const claim = step.next === TaskState.CONFIRMED ? runner.claimPatch(base) : {};
    const event = recorder.sealEvent(base, type, message, 1, header.messageId);
    let task: TaskRecord;
    try {
      task = await store.createTask({ ...base, ...patch, ...claim, state: step.next }, event, {
        message: { ...cause, reply: event, taskId: spec.id },
        maxActive: max,
        callbackUrl: request.callbackUrl || undefined,
      });
    } catch (error) {
      if (error instanceof StoreLimitError) throw this.concurrencyLimit(max);
      if (error instanceof StoreConflictError && error.reason === "task_exists") throw taskIdInUse(spec.id);
      if (error instanceof StoreConflictError && error.reason === "idempotency_key") {
        const earlier = await store.findTaskByIdempotencyKey(requester.agentId, header.idempotencyKey);
        if (earlier !== undefined) return this.sameAsEarlier(earlier);
      }
      throw error;
    }
    if (task.state === TaskState.CONFIRMED) runner.run(task);
    if (request.callbackUrl) this.options.callbacks.track(task.taskId);
    return { reply: event, task };
  }

  /** A request with an idempotency key already used: the first request's reply and task. */
  private async sameAsEarlier(earlier: TaskRecord): Promise<SendOutcome> {
    const original = await this.options.store.getMessage("p2p", earlier.requestMessageId);
    const reply = original?.reply ?? (await this.options.store.listEvents(earlier.taskId, 1, 1))[0];
    return { reply, task: earlier };
  }

  private async onCancel(header: Header, cancel: TaskCancelPayload, cause: Cause): Promise<SendOutcome> {
    const task = await this.requireOwnTask(header);
    if (!transition(task.state, MessageType.TASK_CANCEL).allowed) this.refuseTransition(task, MessageType.TASK_CANCEL);
    const reason = cancel.reason || "cancelled by the requester";
    const recorded = await this.options.recorder.record({
      taskId: task.taskId,
      apply: MessageType.TASK_CANCEL,
      eventType: MessageType.TASK_ACK,
      replyTo: header.messageId,
      cause,
      build: (current) => ({
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
      }),
    });
    if (recorded === undefined) return this.refuseNow(task.taskId, MessageType.TASK_CANCEL);
    // A run elsewhere stops when it sees the task end; a local one stops now.
    this.options.runner.stopRun(task.taskId, "cancelled");
    return { reply: recorded.event, task: recorded.task };
  }

  private async onInfoProvided(header: Header, provided: TaskInfoProvidedPayload, cause: Cause): Promise<SendOutcome> {
    const task = await this.requireOwnTask(header);
    if (!transition(task.state, MessageType.TASK_INFO_PROVIDED).allowed) this.refuseTransition(task, MessageType.TASK_INFO_PROVIDED);
    const fields: JsonObject = provided.fields ?? {};
    const recorded = await this.options.recorder.record({
      taskId: task.taskId,
      apply: MessageType.TASK_INFO_PROVIDED,
      eventType: MessageType.TASK_ACK,
      replyTo: header.messageId,
      cause,
      build: (current) => ({
        message: create(TaskAckPayloadSchema, {
          taskId: current.taskId,
          acknowledgedMessageId: header.messageId,
          acknowledgedType: MessageType.TASK_INFO_PROVIDED,
          state: TaskState.INFO_PROVIDED,
          message: `received ${Object.keys(fields).join(", ") || "no fields"}`,
        }),
        patch: {
          payload: { ...current.payload, ...fields },
          pendingInfo: undefined,
          statusMessage: "information provided",
          answers: [...current.answers, { kind: "info", phase: current.executionAttempts > 0 ? "execution" : "admission", fields }],
        },
      }),
    });
    if (recorded === undefined) return this.refuseNow(task.taskId, MessageType.TASK_INFO_PROVIDED);
    // A waiting run (here or at another instance) takes the answer; with none, this instance carries on.
    await this.options.runner.afterAnswer(recorded.task);
    return { reply: recorded.event, task: (await this.options.store.getTask(task.taskId)) ?? recorded.task };
  }

  private async onDecision(header: Header, decision: HumanDecisionPayload, cause: Cause): Promise<SendOutcome> {
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
    const fields: JsonObject = { ...(decision.decision?.approvedFields ?? {}), ...(decision.decision?.modifiedFields ?? {}) };
    const decidedBy = { userId: decision.decidedBy?.userId ?? "", userName: decision.decidedBy?.userName ?? "", role: decision.decidedBy?.role ?? "" };
    const recorded = await this.options.recorder.record({
      taskId: task.taskId,
      apply: MessageType.HUMAN_DECISION,
      action,
      eventType: MessageType.TASK_ACK,
      replyTo: header.messageId,
      cause,
      build: (current) => ({
        message: create(TaskAckPayloadSchema, {
          taskId: current.taskId,
          acknowledgedMessageId: header.messageId,
          acknowledgedType: MessageType.HUMAN_DECISION,
          state: approved ? TaskState.HUMAN_APPROVED : TaskState.HUMAN_REJECTED,
          message: approved ? `${DecisionAction[action].toLowerCase()}d by ${decidedBy.userName || decidedBy.userId || "a human"}` : decision.decision?.rejectionReason || "rejected",
        }),
        patch: {
          pendingDecision: undefined,
          payload: approved ? { ...current.payload, ...fields } : current.payload,
          statusMessage: approved ? "approved" : decision.decision?.rejectionReason || "rejected by a human",
          answers: approved
            ? [
                ...current.answers,
                {
                  kind: "decision",
                  decisionId: current.pendingDecision?.decisionId ?? decision.decisionId,
                  code: current.pendingDecision?.reason?.code ?? "",
                  action: action === DecisionAction.MODIFY ? "modify" : "approve",
                  fields,
                  notes: decision.notes,
                  decidedBy,
                },
              ]
            : current.answers,
        },
      }),
    });
    if (recorded === undefined) return this.refuseNow(task.taskId, MessageType.HUMAN_DECISION);
    if (approved) {
      await this.options.runner.afterAnswer(recorded.task);
    } else {
      // A rejection ends the task: it fails with human_rejected, and any run of it stops.
      const reason = decision.decision?.rejectionReason || "a human rejected the task";
      await this.options.runner.recordFailure(task.taskId, { code: ErrorCode.HUMAN_REJECTED, message: reason, recoverable: false });
      this.options.runner.stopRun(task.taskId, "rejected by a human");
    }
    return { reply: recorded.event, task: (await this.options.store.getTask(task.taskId)) ?? recorded.task };
  }

  private async onTaskAck(opened: OpenedEnvelope, cause: Cause): Promise<SendOutcome> {
    const { header } = opened;
    const task = await this.requireOwnTask(header);
    if (isTerminal(task.state)) {
      // The requester acknowledges the outcome: nothing changes.
      const reply = this.options.recorder.reply(header, MessageType.ACK, create(AckPayloadSchema, { acknowledgedMessageId: header.messageId, message: `task is ${stateName(task.state)}` }));
      return this.answered(opened, cause, reply, task);
    }
    if (!transition(task.state, MessageType.TASK_ACK).allowed) this.refuseTransition(task, MessageType.TASK_ACK);
    const recorded = await this.options.recorder.record({
      taskId: task.taskId,
      apply: MessageType.TASK_ACK,
      eventType: MessageType.TASK_ACK,
      replyTo: header.messageId,
      cause,
      build: (current) => ({
        message: create(TaskAckPayloadSchema, {
          taskId: current.taskId,
          acknowledgedMessageId: header.messageId,
          acknowledgedType: MessageType.TASK_ACK,
          state: TaskState.HUMAN_DECIDING,
          message: "a human is deciding",
        }),
        patch: { statusMessage: "a human is deciding" },
      }),
    });
    if (recorded === undefined) return this.refuseNow(task.taskId, MessageType.TASK_ACK);
    return { reply: recorded.event, task: recorded.task };
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

  /** A signed heartbeat for a peer (also sent on idle Watch streams). */
  sealHeartbeat(receiver: TaskRecord["requester"]): Promise<StoredReply> {
    return this.options.recorder.sealHeartbeat(receiver, this.draining);
  }

  /**
   * Resolves with the task once it is terminal or waits for its requester,
   * or when `waitMs` has passed. Events committed by any instance count.
   */
  async waitForOutcome(taskId: string, waitMs: number, signal?: AbortSignal): Promise<TaskRecord | undefined> {
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
        signal?.removeEventListener("abort", onAbort);
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
      const onAbort = () => finish();
      const timer = setTimeout(() => finish(), waitMs);
      signal?.addEventListener("abort", onAbort, { once: true });
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

function replayed(messageId: string) {
  return protocolError(ErrorCode.REPLAY_DETECTED, `message id ${messageId} was already used by another message`);
}

function taskIdInUse(taskId: string) {
  return protocolError(ErrorCode.INVALID_PARAMS, `task id ${taskId} is already in use`, { status: Code.AlreadyExists });
}
