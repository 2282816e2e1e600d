// The memory bench's output: RSS at each checkpoint per store, growth in MiB
// and per task, as a table or one JSON object.
import { table } from "./report.js";

export interface Checkpoint {
  tasks: number;
  rss_bytes: number;
  /** VmHWM: the highest RSS so far. */
  peak_rss_bytes: number;
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
    lines.push(`sqlite target (growth < 50 MB over 100k tasks): ${(bytes / 1e6).toFixed(1)} MB, ${bytes < SQLITE_TARGET.bytes ? "met" : "NOT met"}`);
  }
  if (rows.some((r) => r.store === "memory")) {
    lines.push("memory store: keeps every task, event log and seen message until --retention (default 7d) passes; its growth is expected (it is for tests)");
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
  const failures = report.rows.filter((row) => row.failed !== null).map((row) => `${row.store}: stopped early: ${row.failed}`);
  const lines = [
    `config:\n  ${config}`,
    "",
    out,
    "",
    ...verdict(report.rows),
    ...failures,
    ...(report.skipped ? [report.skipped] : []),
    "RSS: VmRSS of the synapse serve process (PostgreSQL's own processes not counted), sampled when no task is in flight; nothing forced (no GC calls).",
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
