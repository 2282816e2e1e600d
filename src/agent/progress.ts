// Progress reports, coalesced: a handler may report as often as it likes,
// but a status update is recorded (sealed, committed, pushed) at most once
// per interval, with the latest report; one that a completion or another
// event follows within the interval says nothing new and is dropped.
import type { JsonValue } from "@bufbuild/protobuf";

export interface ProgressReport {
  percent: number;
  message: string;
  intermediate?: JsonValue;
}

interface Pending {
  report: ProgressReport;
  timer: NodeJS.Timeout;
}

export class ProgressReports {
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly delayMs: number,
    private readonly record: (taskId: string, report: ProgressReport) => Promise<void>,
  ) {}

  /** Keeps the report as the task's latest; it is recorded after the interval unless something else comes first. */
  report(taskId: string, report: ProgressReport): void {
    const held = this.pending.get(taskId);
    if (held !== undefined) {
      held.report = report;
      return;
    }
    const timer = setTimeout(() => void this.flush(taskId), this.delayMs);
    this.pending.set(taskId, { report, timer });
  }

  /** Records the task's pending report now (before a question, say). */
  async flush(taskId: string): Promise<void> {
    const held = this.take(taskId);
    if (held !== undefined) await this.record(taskId, held).catch(() => undefined);
  }

  /** Drops the task's pending report, returning it. */
  take(taskId: string): ProgressReport | undefined {
    const held = this.pending.get(taskId);
    if (held === undefined) return undefined;
    clearTimeout(held.timer);
    this.pending.delete(taskId);
    return held.report;
  }

  clear(): void {
    for (const held of this.pending.values()) clearTimeout(held.timer);
    this.pending.clear();
  }
}
