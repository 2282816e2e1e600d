// Decision deadlines: a task waiting for a human decision past its
// deadline escalates one level, or fails with execution_timeout after the
// last (escalation.ts). Deadlines are read from the store (so they hold
// across restarts and whichever instance asked): the ones due before the
// next scan get a timer; any instance may fire one, and only the first
// change of a decision sticks.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Logger } from "../log.js";
import type { TaskRecord, TaskStore } from "../store/store.js";

export interface DeadlineOptions {
  store: TaskStore;
  logger: Logger;
  now: () => number;
  /** How far ahead a scan arms timers (a lease: scans run three times as often). */
  horizonMs: number;
  /** Escalates or fails a task whose decision `decisionId` is past its deadline; the task after, if it changed. */
  expire(taskId: string, decisionId: string): Promise<TaskRecord | undefined>;
}

export class DecisionDeadlines {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(private readonly options: DeadlineOptions) {}

  /** Arms timers for the decision deadlines that fall before the next scan; overdue ones fire now. */
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
    try {
      const after = await this.options.expire(taskId, decisionId);
      // The next level's deadline (this instance recorded it, so it arms it; others find it at their next scan).
      if (after?.pendingDecision?.deadline !== undefined) this.arm(after);
      else if (after === undefined) {
        // Someone else changed the decision first: its new deadline, if any, is armed here too.
        const current = await this.options.store.getTask(taskId);
        if (current?.pendingDecision !== undefined && current.pendingDecision.decisionId !== decisionId) this.arm(current);
      }
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
