// The stores bench's output: per store and protocol, the medians over the
// rounds and the ratio to the memory store, as a table or one JSON object.
import { table } from "./report.js";

export interface StoreRound {
  round: number;
  store: string;
  protocol: string;
  requests: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  /** The server process's CPU time (user + system) over the measured seconds, per completed task. */
  server_cpu_ms_per_task: number;
  /** rps over the memory store's rps in the same round and protocol. */
  ratio_to_memory: number | null;
  /** Server CPU per task over the memory store's in the same round and protocol (above 1: costlier). */
  cpu_vs_memory: number | null;
}

export interface StoreSummary {
  store: string;
  protocol: string;
  rounds: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  server_cpu_ms_per_task: number;
  /** Median of the per-round ratios, and their spread. */
  ratio_to_memory: number | null;
  ratio_min: number | null;
  ratio_max: number | null;
  /** Median of the per-round server-CPU-per-task ratios. */
  cpu_vs_memory: number | null;
}

export interface StoresReport {
  config: Record<string, string | number>;
  notes: string[];
  skipped: string | null;
  summary: StoreSummary[];
  rounds: StoreRound[];
}

/** The aim: SQLite at least 0.8x the memory store. */
export const SQLITE_AIM = 0.8;

function aim(summary: StoreSummary[]): string[] {
  return summary
    .filter((row) => row.store === "sqlite" && row.ratio_to_memory !== null)
    .map((row) => `sqlite / memory over ${row.protocol}: ${row.ratio_to_memory!.toFixed(2)}x (aim >= ${SQLITE_AIM}x: ${row.ratio_to_memory! >= SQLITE_AIM ? "met" : "NOT met"})`);
}

export function toStoresTable(report: StoresReport): string {
  const config = Object.entries(report.config).map(([key, value]) => `${key}=${value}`).join("\n  ");
  const ratio = (row: StoreSummary) =>
    row.ratio_to_memory === null ? "-" : row.store === "memory" ? "1.00" : `${row.ratio_to_memory.toFixed(2)} (${row.ratio_min!.toFixed(2)}-${row.ratio_max!.toFixed(2)})`;
  const out = table(
    ["store", "protocol", "tasks/s", "p50 ms", "p99 ms", "server CPU ms/task", "CPU vs memory", "tasks/s vs memory (min-max)"],
    report.summary.map((row) => [
      row.store,
      row.protocol,
      row.rps.toFixed(0),
      row.p50_ms.toFixed(2),
      row.p99_ms.toFixed(2),
      row.server_cpu_ms_per_task.toFixed(2),
      row.cpu_vs_memory === null ? "-" : `${row.cpu_vs_memory.toFixed(2)}x`,
      ratio(row),
    ]),
  );
  const lines = [
    `config:\n  ${config}`,
    "",
    out,
    "",
    ...aim(report.summary),
    ...(report.skipped ? [report.skipped] : []),
    `Medians over ${report.config.rounds} interleaved rounds (order rotated each round); each ratio is against the memory store in the same round.`,
    "Shared CPUs: the load generator signs and verifies on the same machine as the server; numbers are noisy, compare ratios, not absolutes.",
    "Server CPU: user + system time of the synapse serve process only (not PostgreSQL's) per task; steadier than tasks/s on a busy machine.",
    "stores:",
    ...report.notes.map((note) => `  ${note}`),
  ];
  return `${lines.join("\n")}\n`;
}

const round = (value: number | null, digits: number) => (value === null ? null : Number(value.toFixed(digits)));

export function toStoresJson(report: StoresReport): string {
  const rows = <T extends StoreRound | StoreSummary>(list: T[]) =>
    list.map((row) => ({
      ...row,
      rps: round(row.rps, 1),
      p50_ms: round(row.p50_ms, 3),
      p99_ms: round(row.p99_ms, 3),
      server_cpu_ms_per_task: round(row.server_cpu_ms_per_task, 3),
      ratio_to_memory: round(row.ratio_to_memory, 3),
      cpu_vs_memory: round(row.cpu_vs_memory, 3),
      ...("ratio_min" in row ? { ratio_min: round(row.ratio_min, 3), ratio_max: round(row.ratio_max, 3) } : {}),
    }));
  return `${JSON.stringify({ ...report, summary: rows(report.summary), rounds: rows(report.rounds) })}\n`;
}
