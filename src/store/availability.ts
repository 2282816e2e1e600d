// Whether a store that lives elsewhere (a database server) can be used now:
// a use that fails to reach it marks it down at once, and while it is down a
// cheap probe runs every so often until it answers, so that uses fail fast
// meanwhile and service resumes within a probe interval of its return.
import type { Logger } from "../log.js";
import { StoreUnavailableError } from "./errors.js";

export interface StoreAvailability {
  /** Whether the store is usable, as far as the last use or probe tells. */
  readonly up: boolean;
  /** Calls `listener` on every change of `up`; returns what stops it. */
  onChange(listener: (up: boolean) => void): () => void;
}

export interface AvailabilityOptions {
  /** Resolves when the store answers, rejects when it does not. */
  probe: () => Promise<void>;
  /** Between probes while down. */
  probeIntervalMs: number;
  /** What a use refused while down tells its caller. */
  retryAfterSeconds: number;
  logger: Logger;
  /** Names the store in logs (never a password). */
  where: string;
}

export class AvailabilityTracker implements StoreAvailability {
  #up = true;
  #downSinceMs = 0;
  #probing: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #listeners = new Set<(up: boolean) => void>();

  constructor(private readonly options: AvailabilityOptions) {}

  get up(): boolean {
    return this.#up;
  }

  onChange(listener: (up: boolean) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Refuses at once while the store is known to be down. */
  check(): void {
    if (!this.#up) throw this.unavailable();
  }

  /** The error a use gets while the store is down (or when it just failed to reach it). */
  unavailable(cause?: unknown): StoreUnavailableError {
    const why = cause instanceof Error ? `: ${cause.message}` : "";
    return new StoreUnavailableError(`the state store (${this.options.where}) is unreachable${why}; try again`, "unreachable", this.options.retryAfterSeconds, { cause });
  }

  /** A use could not reach the store: down until a probe gets an answer. */
  lost(cause: unknown): void {
    if (this.#closed) return;
    if (this.#up) {
      this.#up = false;
      this.#downSinceMs = Date.now();
      this.options.logger.warn({ store: this.options.where, err: cause }, "the state store is unreachable; refusing its uses until it answers again");
      this.#emit();
    }
    this.#scheduleProbe();
  }

  /**
   * Something hints that the store went away (a notification connection
   * dropped) while no use failed: a probe now decides. An idle server learns
   * of an outage this way before a call finds it.
   */
  suspect(cause: unknown): void {
    if (this.#closed || !this.#up) return;
    this.options.probe().then(
      () => undefined,
      () => this.lost(cause),
    );
  }

  #scheduleProbe(): void {
    if (this.#probing !== undefined || this.#closed) return;
    this.#probing = setTimeout(() => {
      this.options.probe().then(
        () => {
          this.#probing = undefined;
          if (this.#closed || this.#up) return;
          this.#up = true;
          this.options.logger.warn({ store: this.options.where, down_ms: Date.now() - this.#downSinceMs }, "the state store answers again");
          this.#emit();
        },
        () => {
          this.#probing = undefined;
          this.#scheduleProbe();
        },
      );
    }, this.options.probeIntervalMs);
    this.#probing.unref();
  }

  #emit(): void {
    for (const listener of [...this.#listeners]) listener(this.#up);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#probing);
  }
}
