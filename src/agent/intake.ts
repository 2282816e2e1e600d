// Intake: a task_request becomes a task. Admission (type, deadline, input
// schema, the handler's validateTask) decides its first event; the task,
// that event, the request message (remembered for replays), the
// concurrency limit and, for a confirmed task, its first run's lease are
// one commit. An idempotency key already used answers with the first task.
import { Code } from "@connectrpc/connect";
import type { Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { TaskState, type TaskRequestPayload } from "../../gen/synapse/v1/payloads_pb.js";
import type { CapabilitiesProvider } from "../capabilities/provider.js";
import type { OutboundPolicy } from "../net/outbound-policy.js";
import { protocolError } from "../protocol/errors.js";
import { transition } from "../protocol/state-machine.js";
import { transitioning } from "../observability/spans.js";
import { carriedOf } from "../observability/trace-context.js";
import { StoreConflictError, StoreLimitError, type NewTask, type StoredEvent, type TaskRecord, type TaskStore } from "../store/store.js";
import { admissionEvent, admissionOutcome } from "./admission.js";
import type { CallbackSender } from "./callbacks.js";
import type { Cause, SendOutcome } from "./send-outcome.js";
import type { TaskHandler } from "./handler.js";
import { ACTIVE_STATES, type EventRecorder } from "./recorder.js";
import type { ExecutionRunner } from "./runner.js";
import type { TaskSchemas } from "./schemas.js";
import type { AgentUploads } from "./uploads.js";
import { seenWithReply } from "./message-gate.js";
import type { TaskKeys } from "./task-keys.js";

export const RETRY_AFTER_SECONDS = 5;

export interface IntakeOptions {
  capabilities: CapabilitiesProvider;
  handlers: ReadonlyMap<string, TaskHandler>;
  schemas: TaskSchemas;
  store: TaskStore;
  recorder: EventRecorder;
  runner: ExecutionRunner;
  callbacks: CallbackSender;
  outbound: OutboundPolicy;
  now: () => number;
  /** True once the agent is shutting down: new tasks are refused. */
  draining: () => boolean;
  /** Checks the uploads a request names. */
  uploads: AgentUploads;
  /** The keys of confidential tasks. */
  keys: TaskKeys;
}

export class TaskIntake {
  constructor(private readonly options: IntakeOptions) {}

  private concurrencyLimit(max: number) {
    return protocolError(ErrorCode.CONCURRENCY_LIMIT, `${max === 1 ? "1 task is" : `${max} tasks are`} running, the most this agent takes (max_concurrent_tasks)`, {
      retryAfterSeconds: RETRY_AFTER_SECONDS,
      details: { max_concurrent_tasks: max },
    });
  }

  async request(header: Header, request: TaskRequestPayload, cause: Cause): Promise<SendOutcome> {
    const { store, capabilities, runner, recorder } = this.options;
    const spec = request.task;
    if (spec === undefined || spec.type === "") throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "payload.task with a type is required");
    if (spec.id !== header.taskId) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "payload.task.id must equal header.task_id");
    // Only what the URL alone decides; the resolved address is checked when each callback connects.
    const callbackProblem = request.callbackUrl ? this.options.outbound.urlProblem(request.callbackUrl) : undefined;
    if (callbackProblem) throw protocolError(ErrorCode.INVALID_PARAMS, `callback_url ${JSON.stringify(request.callbackUrl)} ${callbackProblem}`);
    const requester = { agentId: header.sender!.agentId, systemId: header.sender!.systemId, keyId: header.sender!.keyId };
    if (header.confidential === undefined && capabilities.findTaskType(spec.type)?.requiresConfidentiality) {
      throw protocolError(ErrorCode.CONFIDENTIALITY_REQUIRED, `task type ${spec.type} takes only confidential requests (docs/PROTOCOL.md §9)`);
    }
    if (header.idempotencyKey) {
      const earlier = await store.findTaskByIdempotencyKey(requester.agentId, header.idempotencyKey);
      if (earlier !== undefined) return this.sameAsEarlier(earlier);
    }
    if (this.options.draining()) throw protocolError(ErrorCode.AGENT_NOT_READY, "the agent is shutting down", { retryAfterSeconds: RETRY_AFTER_SECONDS });
    const max = capabilities.getCapabilities().maxConcurrentTasks;
    // A cheap early refusal; the commit below checks again, atomically.
    if ((await store.countTasks(ACTIVE_STATES)) >= max) throw this.concurrencyLimit(max);
    if (await store.getTask(spec.id)) throw taskIdInUse(spec.id);
    await this.options.uploads.admit(requester.agentId, spec.id, request.uploads);
    const payload = spec.payload ?? {};
    const now = this.options.now();
    const admission = await admissionOutcome(
      { handlers: this.options.handlers, schemas: this.options.schemas, now: this.options.now },
      spec.type,
      payload,
      requester,
      spec.deadline,
      spec.id,
      header.messageId,
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
      // Every event and reply of the task carries these, as the request did.
      carried: carriedOf(header),
      confidential: header.confidential,
    };
    if (header.confidential !== undefined) this.options.keys.adopt(header, base);
    const { type, message, patch } = admissionEvent(base, admission, capabilities.findTaskType(spec.type)?.capabilities ?? []);
    const step = transition(TaskState.PENDING, type);
    if (!step.allowed) throw protocolError(ErrorCode.INTERNAL, "admission produced an illegal first event");
    // A confirmed task's first run is counted (and leased to this instance) in the commit that admits it.
    const claim = step.next === TaskState.CONFIRMED ? runner.claimPatch(base) : {};
    let event: StoredEvent | undefined;
    let task: TaskRecord;
    try {
      task = await transitioning(spec.id, TaskState.PENDING, step.next, base.carried, () => {
        event = recorder.sealEvent(base, type, message, 1, header.messageId);
        return store.createTask({ ...base, ...patch, ...claim, state: step.next }, event, {
          message: seenWithReply(cause, event, spec.id),
          maxActive: max,
          callbackUrl: request.callbackUrl || undefined,
        });
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
    recorder.committed(TaskState.PENDING, { task, event: event! });
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

}

function taskIdInUse(taskId: string) {
  return protocolError(ErrorCode.INVALID_PARAMS, `task id ${taskId} is already in use`, { status: Code.AlreadyExists });
}
