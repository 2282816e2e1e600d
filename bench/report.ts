// Formats the results: a plain-text table, or one JSON object.
import type { CryptoResult } from "./crypto.js";

export interface RpcRow {
  workload: string;
  protocol: string;
  requests: number;
  seconds: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  /** rps over the baseline's rps on the same protocol; null for the baseline itself. */
  ratio_to_baseline: number | null;
}

export interface Report {
  config: Record<string, string | number>;
  rpc: RpcRow[];
  crypto: CryptoResult[];
  crypto_ratio: { sign: number; verify: number };
}

const round = (value: number, digits: number) => Number(value.toFixed(digits));

/** Rounds for output only; every figure is computed from unrounded values. */
export function toJson(report: Report): string {
  return `${JSON.stringify({
    config: report.config,
    rpc: report.rpc.map((row) => ({
      ...row,
      seconds: round(row.seconds, 3),
      rps: round(row.rps, 1),
      p50_ms: round(row.p50_ms, 3),
      p99_ms: round(row.p99_ms, 3),
      ratio_to_baseline: row.ratio_to_baseline === null ? null : round(row.ratio_to_baseline, 3),
    })),
    crypto: report.crypto.map((row) => ({ ...row, sign_ops: Math.round(row.sign_ops), verify_ops: Math.round(row.verify_ops) })),
    crypto_ratio: { sign: round(report.crypto_ratio.sign, 2), verify: round(report.crypto_ratio.verify, 2) },
  })}\n`;
}

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => (row[i] ?? "").length)));
  // First column left-aligned (names), the rest right-aligned (numbers).
  const line = (cells: string[]) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join("  ");
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

export function toTable(report: Report): string {
  const config = Object.entries(report.config).map(([key, value]) => `${key}=${value}`).join(" ");
  const rpc = table(
    ["workload", "protocol", "requests", "seconds", "req/s", "p50 ms", "p99 ms", "vs baseline"],
    report.rpc.map((row) => [
      row.workload,
      row.protocol,
      String(row.requests),
      row.seconds.toFixed(2),
      row.rps.toFixed(0),
      row.p50_ms.toFixed(2),
      row.p99_ms.toFixed(2),
      row.ratio_to_baseline === null ? "-" : row.ratio_to_baseline.toFixed(2),
    ]),
  );
  const crypto = table(
    ["Ed25519, 256-byte message", "sign ops/s", "verify ops/s"],
    [
      ...report.crypto.map((row) => [row.implementation, row.sign_ops.toFixed(0), row.verify_ops.toFixed(0)]),
      [`ratio ${report.crypto[0]?.implementation ?? "default"} / tweetnacl`, report.crypto_ratio.sign.toFixed(1), report.crypto_ratio.verify.toFixed(1)],
    ],
  );
  return `${config}\n\n${rpc}\n\n${crypto}\n`;
}
