// The confidential bench's output: per kind (plain, confidential) the
// medians over the rounds, and the medians of the per-round ratios
// confidential / plain beside the targets, as a table or one JSON object.
import { table } from "./report.js";

export type Kind = "plain" | "confidential";

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export interface CpuRound {
  round: number;
  kind: Kind;
  tasks: number;
  seconds: number;
  tasks_per_s: number;
  p50_ms: number;
  p99_ms: number;
  /** The server process's CPU time (user + system) over the round's tasks, per task. */
  server_cpu_ms_per_task: number;
}

export interface CpuSummary {
  kind: Kind;
  rounds: number;
  tasks_per_s: number;
  p50_ms: number;
  p99_ms: number;
  server_cpu_ms_per_task: number;
}

export interface CpuPart {
  summary: CpuSummary[];
  /** Server CPU per task, confidential over plain in the same round: median and spread. */
  cpu_ratio: Spread | null;
  /** tasks/s, confidential over plain in the same round. */
  tasks_per_s_ratio: Spread | null;
  rounds: CpuRound[];
}

export interface ResultRound {
  round: number;
  kind: Kind;
  results: number;
  /** The opened result, bytes (the same for both kinds). */
  result_bytes: number;
  /** What ReadResult sent: the result itself, or its sealed records. */
  stream_bytes: number;
  /** Submit to opened bytes, mean over the round's results. */
  ms_per_result: number;
  /** Opened result bytes over that time. */
  mib_per_s: number;
  server_cpu_ms_per_result: number;
}

export interface ResultSummary {
  kind: Kind;
  rounds: number;
  stream_bytes: number;
  mib_per_s: number;
  ms_per_result: number;
  server_cpu_ms_per_result: number;
}

export interface ResultPart {
  /** Data rows of the CSV, and so parsed_rows of the result. */
  rows: number;
  result_bytes: number;
  summary: ResultSummary[];
  /** Result MiB/s, confidential over plain in the same round. */
  mib_per_s_ratio: Spread | null;
  rounds: ResultRound[];
}

export interface ConfidentialReport {
  config: Record<string, string | number>;
  cpu: CpuPart;
  result: ResultPart;
}

/** The targets for confidential against plain. */
export const TARGETS = { cpu_per_task_at_most: 1.25, result_mib_per_s_at_least: 0.8 } as const;

const MIB = 1024 * 1024;
const ratio = (value: Spread | null) => (value === null ? "-" : `${value.median.toFixed(2)}x (${value.min.toFixed(2)}-${value.max.toFixed(2)})`);

export function toConfidentialTable(report: ConfidentialReport): string {
  const config = Object.entries(report.config).map(([key, value]) => `${key}=${value}`).join("\n  ");
  const cpu = table(
    ["text_analysis", "tasks/s", "p50 ms", "p99 ms", "server CPU ms/task"],
    report.cpu.summary.map((row) => [row.kind, row.tasks_per_s.toFixed(0), row.p50_ms.toFixed(2), row.p99_ms.toFixed(2), row.server_cpu_ms_per_task.toFixed(3)]),
  );
  const result = table(
    ["1 MiB result", "stream bytes", "ms/result", "result MiB/s", "server CPU ms/result"],
    report.result.summary.map((row) => [
      row.kind,
      String(row.stream_bytes),
      row.ms_per_result.toFixed(0),
      row.mib_per_s.toFixed(2),
      row.server_cpu_ms_per_result.toFixed(0),
    ]),
  );
  const lines = [
    `config:\n  ${config}`,
    "",
    cpu,
    "",
    `confidential / plain, server CPU per task: ${ratio(report.cpu.cpu_ratio)}   target <= ${TARGETS.cpu_per_task_at_most}x`,
    `confidential / plain, tasks/s:             ${ratio(report.cpu.tasks_per_s_ratio)}`,
    "",
    result,
    "",
    `result: ${report.result.rows} parsed_rows, ${report.result.result_bytes} bytes (${(report.result.result_bytes / MIB).toFixed(3)} MiB) opened, checked for both kinds`,
    `confidential / plain, result MiB/s:        ${ratio(report.result.mib_per_s_ratio)}   target >= ${TARGETS.result_mib_per_s_at_least}x`,
    "",
    `Ratios: the median (min-max) of the per-round ratios over ${report.config.rounds} interleaved rounds (order swapped each round).`,
    "Server CPU: user + system time of the synapse serve process only; the requesters sign, seal and open in this process, on the same cores.",
    "result MiB/s: opened result bytes over the time from submit to opened bytes (submit with wait, GetTask and its sealed events when confidential, ReadResult).",
  ];
  return `${lines.join("\n")}\n`;
}

const round = (value: number, digits: number) => Number(value.toFixed(digits));
const roundSpread = (value: Spread | null) => (value === null ? null : { median: round(value.median, 3), min: round(value.min, 3), max: round(value.max, 3) });
const roundRow = <T extends object>(row: T): T =>
  Object.fromEntries(Object.entries(row).map(([key, value]) => [key, typeof value === "number" && !Number.isInteger(value) ? round(value, 3) : value])) as T;

export function toConfidentialJson(report: ConfidentialReport): string {
  return `${JSON.stringify({
    config: report.config,
    targets: TARGETS,
    cpu: {
      summary: report.cpu.summary.map(roundRow),
      cpu_ratio: roundSpread(report.cpu.cpu_ratio),
      tasks_per_s_ratio: roundSpread(report.cpu.tasks_per_s_ratio),
      rounds: report.cpu.rounds.map(roundRow),
    },
    result: {
      rows: report.result.rows,
      result_bytes: report.result.result_bytes,
      summary: report.result.summary.map(roundRow),
      mib_per_s_ratio: roundSpread(report.result.mib_per_s_ratio),
      rounds: report.result.rounds.map(roundRow),
    },
  })}\n`;
}
