// Decision deadlines: a task waiting for a human decision past its
// deadline fails with execution_timeout. Deadlines are read from the store
// (so they hold across restarts and whichever instance asked): the ones due
// before the next scan get a timer; any instance may fire one, the state
// machine lets only the first change the task.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { Logger } from "../log.js";
import type { TaskRecord, TaskStore } from "../store/store.js";
import type { FailureReport } from "./execution.js";
import { WAITING_FOR_HUMAN } from "./questions.js";

export interface DeadlineOptions {
  store: TaskStore;
  logger: Logger;
  now: () => number;
  /** How far ahead a scan arms timers (a lease: scans run three times as often). */
  horizonMs: number;
  /** Records the task's failure. */
  fail(taskId: string, failure: FailureReport): Promise<void>;
}

export class DecisionDeadlines {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(private readonly options: DeadlineOptions) {}

  /** Arms timers for the decision deadlines that fall before the next scan; overdue ones fail now. */
  async armDue(): Promise<void> {
    const horizon = this.options.now() + this.options.horizonMs;
    for (const task of await this.options.store.listDecisionDeadlines(horizon, 1000)) this.arm(task);
  }

  arm(task: TaskRecord): void {
    const deadline = task.pendingDecision?.deadline;
    if (deadline === undefined || this.timers.has(task.taskId) || this.stopped) return;
    const wait = Math.max(0, timestampMs(deadline) - this.options.now());
    if (wait > this.options.horizonMs * 2) return; // a later scan arms it
    const timer = setTimeout(() => {
      this.timers.delete(task.taskId);
      void this.expireDecision(task.taskId, task.pendingDecision!.decisionId);
    }, wait);
    timer.unref();
    this.timers.set(task.taskId, timer);
  }

  private async expireDecision(taskId: string, decisionId: string): Promise<void> {
    const task = await this.options.store.getTask(taskId);
    if (task === undefined || !WAITING_FOR_HUMAN.has(task.state) || task.pendingDecision?.decisionId !== decisionId) return;
    const failure = { code: ErrorCode.EXECUTION_TIMEOUT, message: "no human decision before the deadline", recoverable: true };
    try {
      await this.options.fail(taskId, failure);
    } catch (error) {
      this.options.logger.warn({ err: error, task_id: taskId }, "could not record a passed decision deadline");
    }
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
