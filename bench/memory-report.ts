// The memory bench's output: RSS at each checkpoint per store, growth in MiB
// and per task, as a table or one JSON object.
import { table } from "./report.js";

export interface Checkpoint {
  tasks: number;
  rss_bytes: number;
  /** VmHWM: the highest RSS so far. */
  peak_rss_bytes: number;
  /** V8 heap in use after the last full GC before this checkpoint (from --trace-gc), or null before the first. */
  heap_after_full_gc_bytes: number | null;
  /** Full GCs so far. */
  full_gcs: number;
  /** Server CPU time so far (user + system). */
  cpu_ms: number;
}

export interface MemoryRow {
  store: string;
  pid: number;
  checkpoints: Checkpoint[];
  tasks_per_second: number;
  /** Why the run stopped early, or null. */
  failed: string | null;
}

export interface MemoryReport {
  config: Record<string, string | number>;
  notes: string[];
  /** Why the PostgreSQL rows did not run, or null. */
  skipped: string | null;
  rows: MemoryRow[];
}

/** The target: SQLite RSS growth over 100k tasks under 50 MB. */
export const SQLITE_TARGET = { tasks: 100_000, bytes: 50e6 };

interface Growth {
  /** RSS at the last checkpoint reached minus RSS at 0. */
  bytes: number;
  /** That over the tasks completed. */
  perTask: number;
  /** Growth per task after the first checkpoint above 0 (warm-up, JIT and pools excluded), or null with fewer than 3 checkpoints. */
  perTaskAfterFirst: number | null;
}

export function growth(row: MemoryRow): Growth | null {
  const first = row.checkpoints[0];
  const last = row.checkpoints.at(-1);
  if (first === undefined || last === undefined || last.tasks === first.tasks) return null;
  const bytes = last.rss_bytes - first.rss_bytes;
  const warm = row.checkpoints[1];
  const perTaskAfterFirst = row.checkpoints.length >= 3 && warm !== undefined && last.tasks > warm.tasks ? (last.rss_bytes - warm.rss_bytes) / (last.tasks - warm.tasks) : null;
  return { bytes, perTask: bytes / (last.tasks - first.tasks), perTaskAfterFirst };
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
const count = (tasks: number) => (tasks >= 1000 && tasks % 1000 === 0 ? `${tasks / 1000}k` : String(tasks));

function verdict(rows: MemoryRow[]): string[] {
  const lines: string[] = [];
  for (const row of rows.filter((r) => r.store === "sqlite")) {
    const at0 = row.checkpoints[0];
    const atTarget = row.checkpoints.find((c) => c.tasks === SQLITE_TARGET.tasks);
    if (at0 === undefined || atTarget === undefined) {
      lines.push(`sqlite target (growth < 50 MB over 100k tasks): not checked, the run did not reach 100k tasks`);
      continue;
    }
    const bytes = atTarget.rss_bytes - at0.rss_bytes;
    const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
    lines.push(`sqlite target (RSS growth < 50 MB over 100k tasks): 0 -> 100k: ${mb(bytes)}, ${bytes < SQLITE_TARGET.bytes ? "met" : "NOT met"}`);
    // The first checkpoint's growth is mostly a fresh process warming up (heap sizing, compiled code, buffers); after it, what stays.
    const warm = row.checkpoints[1];
    if (warm !== undefined && warm.tasks < atTarget.tasks) {
      const after = atTarget.rss_bytes - warm.rss_bytes;
      lines.push(`  after warm-up, ${count(warm.tasks)} -> 100k: ${mb(after)} (${Math.round(after / (atTarget.tasks - warm.tasks))} bytes/task), ${after < SQLITE_TARGET.bytes ? "under" : "over"} 50 MB`);
    }
  }
  if (rows.some((r) => r.store === "memory")) {
    lines.push("memory store: keeps every task, event log and seen message until --retention (default 7d) passes, finished tasks packed into bytes; its growth is expected (it is for tests)");
  }
  return lines;
}

export function toMemoryTable(report: MemoryReport): string {
  const config = Object.entries(report.config).map(([key, value]) => `${key}=${value}`).join("\n  ");
  const counts = [...new Set(report.rows.flatMap((row) => row.checkpoints.map((c) => c.tasks)))].sort((a, b) => a - b);
  const rows = report.rows.map((row) => {
    const g = growth(row);
    const at = (tasks: number) => row.checkpoints.find((c) => c.tasks === tasks);
    const peak = row.checkpoints.at(-1)?.peak_rss_bytes;
    return [
      row.store,
      ...counts.map((tasks) => {
        const c = at(tasks);
        return c === undefined ? "-" : mib(c.rss_bytes);
      }),
      peak === undefined ? "-" : mib(peak),
      g === null ? "-" : mib(g.bytes),
      g === null ? "-" : g.perTask.toFixed(0),
      g?.perTaskAfterFirst == null ? "-" : g.perTaskAfterFirst.toFixed(0),
      row.tasks_per_second.toFixed(0),
    ];
  });
  const warm = counts[1] === undefined ? "first" : count(counts[1]);
  const out = table(
    ["RSS MiB after N tasks", ...counts.map(count), "peak", "growth MiB", "bytes/task", `bytes/task after ${warm}`, "tasks/s"],
    rows,
  );
  const heap = table(
    ["V8 heap MiB after last full GC", ...counts.map(count), "full GCs"],
    report.rows.map((row) => [
      row.store,
      ...counts.map((tasks) => {
        const bytes = row.checkpoints.find((c) => c.tasks === tasks)?.heap_after_full_gc_bytes;
        return bytes == null ? "-" : mib(bytes);
      }),
      String(row.checkpoints.at(-1)?.full_gcs ?? 0),
    ]),
  );
  const failures = report.rows.filter((row) => row.failed !== null).map((row) => `${row.store}: stopped early: ${row.failed}`);
  const lines = [
    `config:\n  ${config}`,
    "",
    out,
    "",
    heap,
    "",
    ...verdict(report.rows),
    ...failures,
    ...(report.skipped ? [report.skipped] : []),
    "RSS: VmRSS of the synapse serve process (PostgreSQL's own processes not counted); 0 is after start and the client's first call,",
    "  later checkpoints when no task is in flight; peak is VmHWM. Nothing is forced in the server (no GC calls, no heap limit);",
    "  --trace-gc only reports the heap left after each full GC V8 chose to run (\"-\": none yet).",
    "stores:",
    ...report.notes.map((note) => `  ${note}`),
  ];
  return `${lines.join("\n")}\n`;
}

export function toMemoryJson(report: MemoryReport): string {
  return `${JSON.stringify({
    ...report,
    rows: report.rows.map((row) => {
      const g = growth(row);
      return {
        ...row,
        tasks_per_second: Number(row.tasks_per_second.toFixed(1)),
        growth_bytes: g?.bytes ?? null,
        growth_bytes_per_task: g === null ? null : Math.round(g.perTask),
        growth_bytes_per_task_after_first: g?.perTaskAfterFirst == null ? null : Math.round(g.perTaskAfterFirst),
      };
    }),
  })}\n`;
}
