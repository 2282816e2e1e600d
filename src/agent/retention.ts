// Bounded memory and disk: finished tasks (with their events, results and
// outbox entries) are dropped once the retention period has passed since
// they ended, and remembered message ids once those messages would be
// refused as expired anyway; uploads no live task uses, after their own period.
import type { Logger } from "../log.js";
import type { MessageStore, TaskStore } from "../store/store.js";
import type { AgentUploads } from "./uploads.js";

export const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
const PRUNE_BATCH = 1000;

export interface RetentionOptions {
  store: TaskStore;
  /** Uploads no live task uses are dropped after their own period. */
  uploads?: AgentUploads;
  /** Other remembered messages to prune (a registry's), if any. */
  messages?: MessageStore[];
  retentionMs: number;
  intervalMs: number;
  logger: Logger;
  now: () => number;
}

export class Retention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(private readonly options: RetentionOptions) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.prune().finally(() => (this.running = undefined));
    }, this.options.intervalMs);
    this.timer.unref();
  }

  /** One pass: every expired message id, and finished tasks in batches until none is left. */
  async prune(): Promise<{ messages: number; tasks: number }> {
    const { store, logger, now } = this.options;
    let messages = 0;
    let tasks = 0;
    try {
      for (const source of [store, ...(this.options.messages ?? [])]) messages += await source.pruneMessages(now());
      const before = now() - this.options.retentionMs;
      for (;;) {
        const dropped = await store.pruneTasks(before, PRUNE_BATCH);
        tasks += dropped;
        if (dropped < PRUNE_BATCH) break;
      }
      if (tasks > 0) logger.info({ tasks, messages }, "pruned finished tasks past their retention");
      const uploads = this.options.uploads;
      if (uploads !== undefined) {
        let dropped = 0;
        for (;;) {
          const batch = await uploads.store.pruneUploads(now() - uploads.limits.keepUnusedMs, PRUNE_BATCH);
          dropped += batch;
          if (batch < PRUNE_BATCH) break;
        }
        if (dropped > 0) logger.info({ uploads: dropped }, "dropped uploads no live task uses, past their keep period");
      }
    } catch (error) {
      logger.warn({ err: error }, "pruning failed");
    }
    return { messages, tasks };
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
