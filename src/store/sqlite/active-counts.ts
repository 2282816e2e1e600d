// How many unfinished tasks are in each state, kept in memory beside the
// SQLite store: this process owns the database (database.ts), so every change
// of a task's state passes through it. Send asks for the active count twice
// per task (the early refusal and the atomic check in the commit), and a
// COUNT over the active index cost more than the rest of the check.
import type Database from "better-sqlite3";
import type { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../../protocol/state-machine.js";

export class ActiveCounts {
  private readonly byState = new Map<TaskState, number>();
  private total = 0;
  private readonly read: Database.Statement;

  constructor(db: Database.Database) {
    this.read = db.prepare("SELECT state, COUNT(*) AS n FROM tasks WHERE active = 1 GROUP BY state");
    this.reload();
  }

  /** Counts again from the table: at start, and after a batch whose commit failed. */
  reload(): void {
    this.byState.clear();
    this.total = 0;
    for (const row of this.read.all() as Array<{ state: TaskState; n: number }>) {
      this.byState.set(row.state, row.n);
      this.total += row.n;
    }
  }

  /** All unfinished tasks. */
  get active(): number {
    return this.total;
  }

  /** Unfinished tasks in these states, or undefined when one of them is terminal (the table knows those). */
  count(states: readonly TaskState[]): number | undefined {
    let sum = 0;
    // A state named twice counts once; no Set per call (Send asks on every task).
    for (let i = 0; i < states.length; i++) {
      const state = states[i]!;
      if (isTerminal(state)) return undefined;
      if (states.indexOf(state) === i) sum += this.byState.get(state) ?? 0;
    }
    return sum;
  }

  /** A task went from `before` (undefined: it is new) to `after`; call once its writes have succeeded. */
  moved(before: TaskState | undefined, after: TaskState): void {
    if (before === after) return;
    if (before !== undefined && !isTerminal(before)) this.add(before, -1);
    if (!isTerminal(after)) this.add(after, 1);
  }

  private add(state: TaskState, delta: number): void {
    this.byState.set(state, (this.byState.get(state) ?? 0) + delta);
    this.total += delta;
  }
}
