// `npm run bench -- confidential`: its options, how its ratios are taken,
// and one tiny run end to end (a real synapse serve child, real gRPC) whose
// report's shape and checks are asserted; no timing is.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BenchUsageError, parseBenchArgs } from "../bench/args.js";
import { summarizeCpu } from "../bench/confidential.js";
import type { CpuRound } from "../bench/confidential-report.js";

const RUN = fileURLToPath(new URL("../dist/bench/run.js", import.meta.url));

function runBench(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [RUN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("bench confidential options", () => {
  it("has its own defaults and takes --rounds, --tasks and --concurrency only", () => {
    expect(parseBenchArgs(["confidential"])).toMatchObject({ mode: "confidential", rounds: 5, confidentialTasks: 400, concurrency: 16 });
    expect(parseBenchArgs(["confidential", "--rounds", "2", "--tasks", "40", "--json"])).toMatchObject({ rounds: 2, confidentialTasks: 40, json: true });
    expect(() => parseBenchArgs(["confidential", "--seconds", "3"])).toThrow(BenchUsageError);
    expect(() => parseBenchArgs(["confidential", "--stores", "sqlite"])).toThrow(BenchUsageError);
    expect(() => parseBenchArgs(["confidential", "--tasks", "1,2"])).toThrow(BenchUsageError);
  });
});

describe("the confidential bench's ratios", () => {
  const row = (round: number, kind: CpuRound["kind"], cpu: number, rps: number): CpuRound => ({
    round,
    kind,
    tasks: 10,
    seconds: 1,
    tasks_per_s: rps,
    p50_ms: 1,
    p99_ms: 2,
    server_cpu_ms_per_task: cpu,
  });

  it("sets each round's confidential figure against the plain one of the same round, then takes the median", () => {
    const summary = summarizeCpu([row(1, "plain", 2, 100), row(1, "confidential", 3, 50), row(2, "confidential", 2, 200), row(2, "plain", 1, 100), row(3, "plain", 4, 100), row(3, "confidential", 4, 100)]);
    expect(summary.cpu_ratio).toEqual({ median: 1.5, min: 1, max: 2 });
    expect(summary.tasks_per_s_ratio).toEqual({ median: 1, min: 0.5, max: 2 });
    expect(summary.summary.map((s) => [s.kind, s.server_cpu_ms_per_task])).toEqual([
      ["plain", 2],
      ["confidential", 3],
    ]);
    // A round without its plain half gives no ratio.
    expect(summarizeCpu([row(1, "confidential", 3, 50)]).cpu_ratio).toBeNull();
  });
});

describe("npm run bench -- confidential", () => {
  it("runs plain and confidential tasks to completion and opens a 1 MiB result of each kind", { timeout: 180_000 }, async () => {
    const { code, stdout, stderr } = await runBench(["confidential", "--rounds", "1", "--tasks", "20", "--concurrency", "4", "--json"]);
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout);
    expect(report.targets).toEqual({ cpu_per_task_at_most: 1.25, result_mib_per_s_at_least: 0.8 });
    expect(report.cpu.rounds.map((r: { kind: string; tasks: number }) => [r.kind, r.tasks])).toEqual([
      ["plain", 20],
      ["confidential", 20],
    ]);
    expect(report.cpu.cpu_ratio.median).toBeGreaterThan(0);
    expect(report.result.result_bytes).toBeGreaterThan(0.99 * 1024 * 1024);
    expect(report.result.result_bytes).toBeLessThan(1.01 * 1024 * 1024);
    const [plain, sealed] = report.result.summary as [{ kind: string; stream_bytes: number }, { kind: string; stream_bytes: number }];
    expect(plain).toMatchObject({ kind: "plain", stream_bytes: report.result.result_bytes });
    // Sealed records carry a 16-byte tag each: the stream is longer than what it opens to.
    expect(sealed.kind).toBe("confidential");
    expect(sealed.stream_bytes).toBeGreaterThan(report.result.result_bytes);
    expect(report.result.mib_per_s_ratio.median).toBeGreaterThan(0);
  });
});
