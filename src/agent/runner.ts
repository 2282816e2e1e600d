// Who runs which task's handler, and what happens when a run is cut short.
// An instance runs a handler only while it holds the task's lease (renewed
// here; every write of the run is fenced by it). Handlers wait for answers
// through the store, so an answer may arrive at any instance. A task whose
// run was interrupted (a restart, a dead instance: its lease expired) is
// taken over: a resumable handler runs again from the task's current
// input, any other task fails with agent_not_ready (recoverable). Decision
// deadlines are kept from the stored times, and escalate as the task type's
// policy says.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { CapabilitiesProvider } from "../capabilities/provider.js";
import type { P2PConfig } from "../capabilities/defaults.js";
import type { Logger } from "../log.js";
import { taskLogFields } from "../observability/log-fields.js";
import { requesterMessageId } from "../protocol/message-ids.js";
import { isTerminal, WAITING_STATES } from "../protocol/state-machine.js";
import { StoreConflictError, type TaskPatch, type TaskRecord, type TaskStore } from "../store/store.js";
import { admissionEvent, admissionOutcome } from "./admission.js";
import { DecisionDeadlines } from "./deadlines.js";
import { Escalator, type EscalationPolicies } from "./escalation.js";
import type { TaskEventBus } from "./events.js";
import { Execution, type ExecutionHost, type FailureReport, type FinishedResult } from "./execution.js";
import type { HumanAnswer, HumanQuestion, MissingFieldSpec, TaskHandler } from "./handler.js";
import { Questions } from "./questions.js";
import type { EventRecorder } from "./recorder.js";
import { RunWrites } from "./run-writes.js";
import type { TaskSchemas } from "./schemas.js";
import type { TaskKeys } from "./task-keys.js";
import type { AgentUploads } from "./uploads.js";

/** States in which a task has work for a handler (or an admission decision) that nobody may be doing. */
export const RUNNABLE_STATES: readonly TaskState[] = [
  TaskState.PENDING,
  TaskState.CONFIRMED,
  TaskState.EXECUTING,
  TaskState.INFO_PROVIDED,
  TaskState.HUMAN_APPROVED,
  TaskState.HUMAN_REJECTED,
];

const SCAN_BATCH = 200;

export interface RunnerOptions {
  capabilities: CapabilitiesProvider;
  handlers: ReadonlyMap<string, TaskHandler>;
  schemas: TaskSchemas;
  store: TaskStore;
  bus: TaskEventBus;
  recorder: EventRecorder;
  config: P2PConfig;
  logger: Logger;
  now: () => number;
  /** This instance, as named in the leases it holds. */
  instanceId: string;
  /** How long a lease lasts unless renewed. */
  leaseMs: number;
  /** At most one progress event per task per this interval (default 100 ms). */
  progressIntervalMs?: number;
  /** Where the files tasks name are read from. */
  uploads?: AgentUploads;
  /** The keys of confidential tasks: a confidential task's uploads are opened with its key. */
  keys?: TaskKeys;
  /** The task types' escalation policies (who decides at which level, how long each waits). */
  escalation: EscalationPolicies;
}

const DEFAULT_PROGRESS_INTERVAL_MS = 100;

export class ExecutionRunner implements ExecutionHost {
  private readonly executions = new Map<string, Execution>();
  private readonly deadlines: DecisionDeadlines;
  private readonly questions: Questions;
  private readonly writes: RunWrites;
  private scanner: NodeJS.Timeout | undefined;
  private scanning: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly options: RunnerOptions) {
    this.writes = new RunWrites({
      store: options.store,
      recorder: options.recorder,
      instanceId: options.instanceId,
      progressIntervalMs: options.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS,
      stopRun: (taskId, why) => this.stopRun(taskId, why),
      stopped: () => this.stopped,
    });
    const escalator = new Escalator({ store: options.store, recorder: options.recorder, policies: options.escalation, logger: options.logger, now: options.now });
    this.deadlines = new DecisionDeadlines({
      store: options.store,
      logger: options.logger,
      now: options.now,
      horizonMs: options.leaseMs,
      expire: (taskId, decisionId) => escalator.expire(taskId, decisionId),
    });
    this.questions = new Questions({
      store: options.store,
      bus: options.bus,
      recorder: options.recorder,
      deadlines: this.deadlines,
      escalation: options.escalation,
      now: options.now,
      instanceId: options.instanceId,
      fenced: (taskId, write) => this.writes.fenced(taskId, write),
    });
  }

  private get me(): string {
    return this.options.instanceId;
  }

  private leaseUntil(): number {
    return this.options.now() + this.options.leaseMs;
  }

  /** The lease fields and attempt count of a run this instance starts now. */
  claimPatch(task: Pick<TaskRecord, "executionAttempts" | "startedAtMs">): TaskPatch {
    return {
      leaseOwner: this.me,
      leaseUntilMs: this.leaseUntil(),
      executionAttempts: task.executionAttempts + 1,
      startedAtMs: task.startedAtMs || this.options.now(),
    };
  }

  /**
   * Takes over interrupted work: at start (the first scan also takes tasks
   * leased to an instance that is gone, when the store is this process's
   * alone), then every third of a lease, with lease renewal and the
   * decision deadlines due soon.
   */
  async start(): Promise<void> {
    await this.scan(this.options.store.exclusive);
    const interval = Math.max(50, Math.floor(this.options.leaseMs / 3));
    this.scanner = setInterval(() => {
      this.scanning ??= this.scan(false).finally(() => (this.scanning = undefined));
    }, interval);
    this.scanner.unref();
  }

  private async scan(takeAll: boolean): Promise<void> {
    try {
      await this.renewLeases();
      await this.takeOverUnleased(takeAll);
      await this.deadlines.armDue();
    } catch (error) {
      this.options.logger.warn({ err: error }, "scanning for interrupted work failed");
    }
  }

  private async renewLeases(): Promise<void> {
    const running = [...this.executions].filter(([, execution]) => !execution.settling);
    if (running.length === 0) return;
    const held = new Set(await this.options.store.renewLeases(this.me, running.map(([taskId]) => taskId), this.leaseUntil()));
    for (const [taskId, execution] of running) {
      // A run that finished meanwhile gave its lease up itself: only one still going has lost it.
      if (held.has(taskId) || execution.settling || this.executions.get(taskId) !== execution) continue;
      this.options.logger.warn({ task_id: taskId }, "lost the lease of a running task; another instance has it");
      execution.stop(undefined, "lease lost");
    }
  }

  private async takeOverUnleased(takeAll: boolean): Promise<void> {
    const seen = new Set<string>();
    for (;;) {
      const batch = (await this.options.store.listUnleased(RUNNABLE_STATES, this.options.now(), SCAN_BATCH, takeAll)).filter(
        (task) => !seen.has(task.taskId) && !this.executions.has(task.taskId),
      );
      if (batch.length === 0 || this.stopped) return;
      for (const task of batch) {
        seen.add(task.taskId);
        await this.takeOver(task, takeAll);
      }
    }
  }

  /** Claims a task nobody runs and carries on with it as a restart would. */
  async takeOver(task: TaskRecord, force = this.options.store.exclusive): Promise<void> {
    if (this.stopped || this.executions.has(task.taskId)) return;
    let claimed: TaskRecord;
    try {
      claimed = await this.options.store.commit(task.taskId, task.version, { leaseOwner: this.me, leaseUntilMs: this.leaseUntil() }, undefined, {
        claim: { nowMs: this.options.now(), force },
      });
    } catch (error) {
      if (error instanceof StoreConflictError) return; // someone else has it, or it moved on
      throw error;
    }
    try {
      await this.resume(claimed);
    } catch (error) {
      this.options.logger.error({ ...taskLogFields(task), err: error }, "could not carry on with an interrupted task");
    }
  }

  /** Section "what a restart means" of the protocol, for a task this instance just claimed. */
  private async resume(task: TaskRecord): Promise<void> {
    const handler = this.options.handlers.get(task.taskType);
    if (task.state === TaskState.HUMAN_REJECTED) {
      return this.failClaimed(task, { code: ErrorCode.HUMAN_REJECTED, message: task.statusMessage || "a human rejected the task", recoverable: false });
    }
    if (task.executionAttempts === 0) {
      // No handler ever ran: decide (again) or start the first run.
      if (task.state === TaskState.CONFIRMED) return this.startClaimed(task);
      return this.readmit(task);
    }
    if (handler?.resumable) {
      this.options.logger.info({ ...taskLogFields(task), attempt: task.executionAttempts + 1 }, "resuming an interrupted task");
      return this.startClaimed(task);
    }
    this.options.logger.info(taskLogFields(task), "an interrupted task's handler cannot resume: the task fails (agent_not_ready)");
    return this.failClaimed(task, {
      code: ErrorCode.AGENT_NOT_READY,
      message: "the agent restarted while the task ran, and its handler cannot resume; it did not run again: submit the task again",
      recoverable: true,
    });
  }

  private async failClaimed(task: TaskRecord, failure: FailureReport): Promise<void> {
    if (!(await this.recordFailure(task.taskId, failure, this.me))) await this.options.store.releaseLeases(this.me, [task.taskId]);
  }

  /** Counts the new attempt (before the handler runs, so a crash never hides one) and runs it. */
  private async startClaimed(task: TaskRecord): Promise<void> {
    const next = await this.options.store.commit(task.taskId, task.version, this.claimPatch(task), undefined, { fence: this.me });
    this.run(next);
  }

  /** Asks admission again, with the payload as completed by the answers. */
  async readmit(task: TaskRecord, fence: string | undefined = this.me): Promise<void> {
    const { handlers, schemas, now, capabilities, recorder } = this.options;
    const admission = await admissionOutcome({ handlers, schemas, now }, task.taskType, task.payload, task.requester, task.request.task?.deadline, task.taskId, task.requestMessageId);
    const used = capabilities.findTaskType(task.taskType)?.capabilities ?? [];
    const recorded = await recorder.record({
      taskId: task.taskId,
      fence,
      build: (current) => {
        const built = admissionEvent(current, admission, used);
        return built.type === MessageType.TASK_CONFIRM ? { ...built, patch: { ...built.patch, ...this.claimPatch(current) } } : built;
      },
    });
    if (recorded?.task.state === TaskState.CONFIRMED) this.run(recorded.task);
    else await this.options.store.releaseLeases(this.me, [task.taskId]);
  }

  /** After an answer was recorded: whoever waits for it wakes; if nobody does, this instance carries on. */
  async afterAnswer(task: TaskRecord): Promise<void> {
    if (this.executions.has(task.taskId)) return; // the local run wakes on the event
    const now = this.options.now();
    const liveElsewhere = task.leaseOwner !== "" && task.leaseOwner !== this.me && task.leaseUntilMs >= now && !this.options.store.exclusive;
    if (liveElsewhere) return;
    if (task.executionAttempts === 0 && task.leaseOwner === "") {
      // Asked at admission: nobody holds it; decide again here.
      return this.takeOver(task, false);
    }
    return this.takeOver(task, true);
  }

  // ── runs ───────────────────────────────────────────────────────────────

  /** Runs the handler of a task this instance has just claimed (with its attempt counted). */
  run(task: TaskRecord): void {
    const handler = this.options.handlers.get(task.taskType);
    if (handler === undefined || this.executions.has(task.taskId) || this.stopped) return;
    const caps = this.options.capabilities.getCapabilities();
    const execution = new Execution(
      {
        taskId: task.taskId,
        taskType: task.taskType,
        payload: task.payload,
        requester: { agentId: task.requester.agentId, systemId: task.requester.systemId },
        requestMessageId: requesterMessageId(task.requestMessageId),
        attempt: task.executionAttempts,
      },
      handler,
      this,
      this.options.schemas,
      {
        startedAtMs: task.startedAtMs || this.options.now(),
        taskTimeoutMs: this.options.config.taskTimeoutMs,
        maxTaskDurationMs: caps.maxTaskDurationSeconds * 1000,
        // Events are carried with their decoded view, and a waited Send also returns the task: keep inline results to a quarter of a message.
        maxInlineOutputBytes: Math.floor(Number(caps.maxFileSize) / 4),
        maxStreamBytes: 1024 * 1024 * 1024,
      },
      this.options.logger,
      this.options.uploads?.forTask(task.requester.agentId, task.request.uploads, task.confidential === undefined || task.request.uploads.length === 0 ? undefined : this.options.keys?.of(task)),
      task.carried,
    );
    this.executions.set(task.taskId, execution);
    // The run ends when the task does, whoever ended it (a cancel or a deadline at another instance).
    const unsubscribe = this.options.bus.subscribe(task.taskId, (change) => {
      if (change.task !== undefined && isTerminal(change.task.state)) execution.stop(undefined, "the task ended");
      else if (change.task === undefined) void this.stopIfEnded(task.taskId, execution);
    });
    execution
      .run()
      .catch((error: unknown) => {
        this.options.logger.error({ ...taskLogFields(task), err: error }, "execution failed unexpectedly");
        return false;
      })
      .then((recordedEnd) => {
        unsubscribe();
        this.writes.progressReports.take(task.taskId);
        this.executions.delete(task.taskId);
        // A run that recorded the task's end gave up its lease in that commit; any other still holds it.
        if (!recordedEnd && !this.stopped) void this.options.store.releaseLeases(this.me, [task.taskId]).catch(() => undefined);
      });
  }

  private async stopIfEnded(taskId: string, execution: Execution): Promise<void> {
    const task = await this.options.store.getTask(taskId).catch(() => undefined);
    if (task === undefined || isTerminal(task.state)) execution.stop(undefined, "the task ended");
  }

  /** Stops a local run without recording anything (its task ended elsewhere, or was cancelled). */
  stopRun(taskId: string, why: string): void {
    this.executions.get(taskId)?.stop(undefined, why);
  }

  isRunning(taskId: string): boolean {
    return this.executions.has(taskId);
  }

  // ── ExecutionHost: what a run records (run-writes.ts), fenced by the lease ──

  async progress(taskId: string, percent: number, message: string, intermediate?: JsonValue): Promise<void> {
    return this.writes.progress(taskId, percent, message, intermediate);
  }

  async currentPayload(taskId: string): Promise<JsonObject> {
    return (await this.options.store.getTask(taskId))?.payload ?? {};
  }

  async askForInfo(execution: Execution, fields: MissingFieldSpec[], question: string | undefined): Promise<JsonObject> {
    // What the handler reported before asking is told before the question.
    await this.writes.progressReports.flush(execution.input.taskId);
    return this.questions.askForInfo(execution, fields, question);
  }

  async askHuman(execution: Execution, question: HumanQuestion): Promise<HumanAnswer> {
    await this.writes.progressReports.flush(execution.input.taskId);
    return this.questions.askHuman(execution, question);
  }

  async complete(taskId: string, result: FinishedResult): Promise<boolean> {
    return this.writes.complete(taskId, result);
  }

  async fail(taskId: string, failure: FailureReport): Promise<boolean> {
    return this.writes.fail(taskId, failure);
  }

  /** Records task_failed, giving up the lease with it (see RunWrites.recordFailure). */
  async recordFailure(taskId: string, failure: FailureReport, fence?: string): Promise<boolean> {
    return this.writes.recordFailure(taskId, failure, fence);
  }

  // ── shutdown ───────────────────────────────────────────────────────────

  /**
   * Stops every local run. A resumable handler's task is left as it is, for
   * a restart or another instance to resume; any other running task fails
   * with agent_not_ready (recoverable). Tasks waiting for an answer keep
   * waiting. Every lease is given up, so others need not wait for expiry.
   */
  async shutdown(graceMs = 2000): Promise<void> {
    this.stopped = true;
    clearInterval(this.scanner);
    this.writes.progressReports.clear();
    this.deadlines.stop();
    const running = [...this.executions.entries()];
    for (const [taskId, execution] of running) {
      const task = await this.options.store.getTask(taskId).catch(() => undefined);
      const waiting = task !== undefined && WAITING_STATES.has(task.state);
      const resumable = this.options.handlers.get(execution.input.taskType)?.resumable === true;
      if (waiting || resumable) execution.stop(undefined, "the agent is shutting down");
      else execution.stop({ code: ErrorCode.AGENT_NOT_READY, message: "the agent shut down while the task ran", recoverable: true }, "stopped by shutdown");
    }
    const deadline = Date.now() + graceMs;
    while (this.executions.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await this.scanning?.catch(() => undefined);
    await this.options.store.releaseLeases(this.me, running.map(([taskId]) => taskId)).catch(() => undefined);
  }
}

