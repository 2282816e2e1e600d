// The ids a client keeps for the tasks it submitted, so that the messages it
// sends about them later (cancel, information, decision, ack) carry the
// task's trace, session and correlation ids. Bounded: the oldest task is
// forgotten first, and a message about a forgotten task starts a new trace.
import type { TraceFields } from "../observability/trace-context.js";

/** How many submitted tasks a client remembers. */
const REMEMBERED_TASKS = 1024;

export interface TaskIds {
  /** The trace the task_request went out in. */
  readonly trace: TraceFields;
  readonly sessionId?: string;
  readonly correlationId?: string;
}

export class RememberedTaskIds {
  private readonly byTask = new Map<string, TaskIds>();

  constructor(private readonly limit = REMEMBERED_TASKS) {}

  remember(taskId: string, ids: TaskIds): void {
    this.byTask.delete(taskId);
    if (this.byTask.size >= this.limit) this.byTask.delete(this.byTask.keys().next().value!);
    this.byTask.set(taskId, ids);
  }

  get(taskId: string | undefined): TaskIds | undefined {
    return taskId === undefined ? undefined : this.byTask.get(taskId);
  }
}
