// Group commit: the writes that arrive while the event loop is busy are
// run together in one SQLite transaction, each inside its own savepoint.
// One write that fails is rolled back alone and rejects alone; the others
// commit. A transaction's cost is mostly the pages it rewrites, and many
// small writes touch the same pages, so a batch costs little more than
// one write. Each write's effects outside the database (announcing the
// change) run after the commit, in order.
import type Database from "better-sqlite3";

export interface BatchResult<T> {
  value: T;
  /** Runs once the batch has committed. */
  after?: () => void;
}

interface Pending {
  work: () => BatchResult<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

export class BatchWriter {
  private pending: Pending[] = [];
  private scheduled = false;
  private readonly sql;

  constructor(
    db: Database.Database,
    /** Called when a batch's commit itself failed: whatever was kept from it must be forgotten. */
    private readonly onLostBatch: () => void,
  ) {
    this.sql = {
      begin: db.prepare("BEGIN IMMEDIATE"),
      commit: db.prepare("COMMIT"),
      rollback: db.prepare("ROLLBACK"),
      savepoint: db.prepare("SAVEPOINT write"),
      release: db.prepare("RELEASE write"),
      undo: db.prepare("ROLLBACK TO write"),
    };
  }

  /** Runs `work` in the next batch; settles after that batch commits (or with the error `work` threw). */
  run<T>(work: () => BatchResult<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Commits what is waiting: when scheduled, and before the database closes. */
  flush(): void {
    this.scheduled = false;
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    const outcomes: Array<{ ok: true; result: BatchResult<unknown> } | { ok: false; error: unknown }> = [];
    try {
      this.sql.begin.run();
    } catch (error) {
      for (const write of batch) write.reject(error);
      return;
    }
    for (const write of batch) {
      this.sql.savepoint.run();
      try {
        outcomes.push({ ok: true, result: write.work() });
        this.sql.release.run();
      } catch (error) {
        this.sql.undo.run();
        this.sql.release.run();
        outcomes.push({ ok: false, error });
      }
    }
    try {
      this.sql.commit.run();
    } catch (error) {
      try {
        this.sql.rollback.run();
      } catch {
        // already rolled back
      }
      this.onLostBatch();
      for (const write of batch) write.reject(error);
      return;
    }
    batch.forEach((write, index) => {
      const outcome = outcomes[index]!;
      if (!outcome.ok) return write.reject(outcome.error);
      try {
        outcome.result.after?.();
      } finally {
        write.resolve(outcome.result.value);
      }
    });
  }
}
