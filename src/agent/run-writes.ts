// What a run writes to its task: progress reports (coalesced), and its
// completion or failure. Every write is fenced by the run's lease (one
// refused for a lost lease stops the run), and a run's last write is tried
// again while the store cannot be used.
import { createHash } from "node:crypto";
import { sealResult } from "../envelope/confidential.js";
import { create, type JsonValue } from "@bufbuild/protobuf";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import {
  TaskCompletePayloadSchema,
  ResultStreamSchema,
  TaskFailedPayloadSchema,
  TaskState,
  TaskStatusUpdatePayloadSchema,
} from "../../gen/synapse/v1/payloads_pb.js";
import { toValue } from "../protocol/json-values.js";
import { StoreUnavailableError } from "../store/errors.js";
import { StoreConflictError, type TaskStore } from "../store/store.js";
import type { FailureReport, FinishedResult } from "./execution.js";
import { ProgressReports, type ProgressReport } from "./progress.js";
import { buildTaskResult, completePayloadBytes } from "./task-result.js";
import type { EventRecorder } from "./recorder.js";

/** How long a finished run keeps trying to record its end while the store cannot be used. */
const RUN_END_RETRY_MS = 10 * 60_000;

export interface RunWritesOptions {
  store: TaskStore;
  recorder: EventRecorder;
  /** This instance, as named in the leases that fence the writes. */
  instanceId: string;
  /** At most one progress event per task per this interval. */
  progressIntervalMs: number;
  /** Stops a local run (its lease was lost). */
  stopRun: (taskId: string, why: string) => void;
  /** Whether the runner is shutting down (a last write is not tried again then). */
  stopped: () => boolean;
}

export class RunWrites {
  /** Progress reports not yet recorded, by task. */
  readonly progressReports: ProgressReports;

  constructor(private readonly options: RunWritesOptions) {
    this.progressReports = new ProgressReports(options.progressIntervalMs, (taskId, report) => this.recordProgress(taskId, report));
  }

  private get me(): string {
    return this.options.instanceId;
  }

  async fenced<T>(taskId: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      if (error instanceof StoreConflictError && error.reason === "lease") this.options.stopRun(taskId, "lease lost");
      throw error;
    }
  }

  async progress(taskId: string, percent: number, message: string, intermediate?: JsonValue): Promise<void> {
    this.progressReports.report(taskId, { percent, message, intermediate });
  }

  /** Records one (coalesced) progress report as a task_status_update. */
  private async recordProgress(taskId: string, { percent, message, intermediate }: ProgressReport): Promise<void> {
    await this.fenced(taskId, () =>
      this.options.recorder.record({
        taskId,
        fence: this.me,
        build: (current) => ({
          type: MessageType.TASK_STATUS_UPDATE,
          message: create(TaskStatusUpdatePayloadSchema, {
            taskId,
            status: TaskState.EXECUTING,
            progress: percent,
            message,
            intermediateResult: intermediate === undefined ? undefined : toValue(intermediate),
          }),
          patch: { progress: Math.max(current.progress, percent), statusMessage: message },
        }),
      }),
    );
  }

  async complete(taskId: string, result: FinishedResult): Promise<boolean> {
    // The completion says more than a progress report it follows within the interval.
    this.progressReports.take(taskId);
    if (result.stream) result = await this.sealedForTask(taskId, result);
    if (result.stream) {
      const bytes = result.stream.bytes;
      await this.untilStored(() => this.options.store.putResult(taskId, bytes));
    }
    const recorded = await this.untilStored(() => this.fenced(taskId, () =>
      this.options.recorder.record({
        taskId,
        fence: this.me,
        build: () => {
          const stream = result.stream
            ? { streamId: taskId, totalSize: BigInt(result.stream.bytes.byteLength), sha256: result.stream.sha256, contentType: result.stream.contentType }
            : undefined;
          const built = buildTaskResult(result.outputType, result.output, result.metadata, stream && create(ResultStreamSchema, stream));
          const message = create(TaskCompletePayloadSchema, { taskId, result: built.result, summary: result.summary });
          return {
            type: MessageType.TASK_COMPLETE,
            message,
            encoded: completePayloadBytes(taskId, built.bytes, result.summary),
            patch: {
              result: built.result,
              progress: 100,
              statusMessage: result.summary || "completed",
              resultStream: result.stream ? { contentType: result.stream.contentType, totalSize: result.stream.bytes.byteLength, sha256: result.stream.sha256 } : undefined,
              leaseOwner: "",
              leaseUntilMs: 0,
            },
          };
        },
      }),
    ));
    return recorded !== undefined;
  }

  /** A confidential task's result stream as it is stored and served: sealed records (docs/PROTOCOL.md §9.5). */
  private async sealedForTask(taskId: string, result: FinishedResult): Promise<FinishedResult> {
    const task = await this.untilStored(() => this.options.store.getTask(taskId));
    if (task?.confidential === undefined || result.stream === undefined) return result;
    const bytes = sealResult(this.options.recorder.keys.of(task), taskId, result.stream.bytes);
    return { ...result, stream: { contentType: result.stream.contentType, bytes, sha256: new Uint8Array(createHash("sha256").update(bytes).digest()) } };
  }

  async fail(taskId: string, failure: FailureReport): Promise<boolean> {
    this.progressReports.take(taskId);
    return this.untilStored(() => this.fenced(taskId, () => this.recordFailure(taskId, failure, this.me)));
  }

  /**
   * A run's last write, tried again while the store cannot be used (its
   * database restarting, its disk full): the outcome of work already done is
   * not given up for an outage. The lease fences every try, so a run whose
   * task another instance took over meanwhile still writes nothing.
   */
  private async untilStored<T>(write: () => Promise<T>): Promise<T> {
    const giveUpAt = Date.now() + RUN_END_RETRY_MS;
    for (let delay = 50; ; delay = Math.min(delay * 2, 250)) {
      try {
        return await write();
      } catch (error) {
        if (this.options.stopped() || !(error instanceof StoreUnavailableError) || Date.now() + delay > giveUpAt) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  /** Records task_failed (fenced by `fence` when given), giving up the lease with it; false when the task had already ended. */
  async recordFailure(taskId: string, failure: FailureReport, fence?: string): Promise<boolean> {
    const recorded = await this.options.recorder.record({
      taskId,
      fence,
      build: () => {
        const message = create(TaskFailedPayloadSchema, {
          taskId,
          error: { code: failure.code, message: failure.message, recoverable: failure.recoverable, details: failure.details === undefined ? undefined : toValue(failure.details) },
        });
        return {
          type: MessageType.TASK_FAILED,
          message,
          patch: { error: message.error, statusMessage: failure.message, pendingInfo: undefined, pendingDecision: undefined, leaseOwner: "", leaseUntilMs: 0 },
        };
      },
    });
    return recorded !== undefined;
  }
}
