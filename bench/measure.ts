// Closed-loop load: a fixed number of workers each run one call after
// another until the deadline; every latency is kept, so p50/p99 are exact
// for the run rather than estimated from buckets.
import { performance } from "node:perf_hooks";

export type Call = () => Promise<void>;

export interface LoadResult {
  requests: number;
  /** From the first call's start to the last call's end (calls started before the deadline are let finish). */
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? Number.NaN;
}

/** Runs `call` with `concurrency` in flight for `durationMs`; the first failure stops every worker and is thrown. */
export async function runLoad(call: Call, concurrency: number, durationMs: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let failed = false;
  const start = performance.now();
  const deadline = start + durationMs;
  const worker = async (): Promise<void> => {
    while (!failed && performance.now() < deadline) {
      const t0 = performance.now();
      try {
        await call();
      } catch (error) {
        failed = true; // the other workers stop after their current call
        throw error;
      }
      latencies.push(performance.now() - t0);
    }
  };
  const outcomes = await Promise.allSettled(Array.from({ length: concurrency }, worker));
  const rejected = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected");
  if (rejected !== undefined) throw rejected.reason;
  const seconds = (performance.now() - start) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  return { requests: latencies.length, seconds, rps: latencies.length / seconds, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) };
}

/** Counts how often `op` runs in `durationMs` (single-threaded, synchronous work). */
export function opsPerSecond(op: () => void, durationMs: number): number {
  let ops = 0;
  const start = performance.now();
  let now = start;
  while (now - start < durationMs) {
    op();
    ops++;
    now = performance.now();
  }
  return ops / ((now - start) / 1000);
}

/**
 * Runs `call` with `concurrency` in flight until exactly `count` calls have
 * completed (each worker takes the next ticket), then returns once none is
 * in flight; the first failure stops every worker and is thrown.
 */
export async function runCount(call: Call, concurrency: number, count: number): Promise<LoadResult> {
  const latencies = new Float64Array(count);
  let issued = 0;
  let done = 0;
  let failed = false;
  const start = performance.now();
  const worker = async (): Promise<void> => {
    while (!failed && issued < count) {
      issued++;
      const t0 = performance.now();
      try {
        await call();
      } catch (error) {
        failed = true;
        throw error;
      }
      latencies[done++] = performance.now() - t0;
    }
  };
  const outcomes = await Promise.allSettled(Array.from({ length: Math.min(concurrency, count) }, worker));
  const rejected = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected");
  if (rejected !== undefined) throw rejected.reason;
  const seconds = (performance.now() - start) / 1000;
  const sorted = latencies.sort();
  return { requests: count, seconds, rps: count / seconds, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) };
}
