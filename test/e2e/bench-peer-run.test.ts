// `npm run bench -- peer` end to end in a tiny configuration (npm run test:bench,
// apart from npm test for its length): real child
// servers (synapse serve on SQLite and memory, the A2A-js peer), the Go load
// generator over real sockets, and a Watch fan-out of 100 streams. It checks
// the report's shape and that every contender completed requests without an
// error; no timing is asserted. Without Go the load generator cannot be
// built, and the test says so and is skipped.
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { WatchLine } from "../../bench/peer/loadgen.js";

const RUN = fileURLToPath(new URL("../../dist/bench/run.js", import.meta.url));
const hasGo = spawnSync("go", ["version"]).status === 0;
if (!hasGo && process.env.CI) throw new Error("bench-peer-run.test.ts: Go is required in CI (the load generator is built with it)");
if (!hasGo) console.warn("bench-peer-run.test.ts: Go is not installed (go not on PATH), so the peer bench's end-to-end test is skipped");

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

describe.skipIf(!hasGo)("npm run bench -- peer", () => {
  it("compares every contender over every protocol and reports memory, payload sizes, fan-out and targets", async () => {
    const { code, stdout, stderr } = await runBench(["--peer", "--rounds", "1", "--seconds", "1", "--concurrency", "4", "--tasks", "200", "--watchers", "100", "--serve-flags=--heap-growth 0", "--json"]);
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout);
    expect(report.config.synapse_serve_flags).toBe("--heap-growth 0");

    const contenders = ["synapse-sqlite", "synapse-memory", "synapse-a2a", "a2a-js"];
    expect(report.summary.map((row: { contender: string; protocol: string }) => `${row.contender}/${row.protocol}`)).toEqual([
      "synapse-sqlite/grpc",
      "synapse-sqlite/connect-json",
      "synapse-memory/grpc",
      "synapse-memory/connect-json",
      "synapse-a2a/grpc",
      "synapse-a2a/jsonrpc",
      "a2a-js/grpc",
      "a2a-js/jsonrpc",
    ]);
    for (const row of report.summary) {
      expect(row.requests, `${row.contender}/${row.protocol}`).toBeGreaterThan(0);
      expect(row.errors, `${row.contender}/${row.protocol}`).toBe(0);
      expect(row.server_cpu_us_per_request).toBeGreaterThan(0);
      expect(row.generator_cpu_us_per_request, `${row.contender}/${row.protocol}`).toBeGreaterThan(0);
      expect(typeof row.p99_ms).toBe("number");
      if (row.contender === "a2a-js") expect(row.rps_vs_peer).toBeNull();
      else expect(row.rps_vs_peer).toMatchObject({ median: expect.any(Number), min: expect.any(Number), max: expect.any(Number) });
    }
    expect(report.turns).toHaveLength(8);
    for (const turn of report.turns) expect(turn).toMatchObject({ round: 1, errors: 0 });

    expect(report.floor.message_bytes).toBeGreaterThan(200);
    expect(report.floor.floor_us).toBeGreaterThan(0);

    expect(report.memory.map((row: { contender: string }) => row.contender)).toEqual(contenders);
    for (const row of report.memory) {
      expect(row.tasks).toBeGreaterThanOrEqual(200);
      expect(row.rss_mib).toBeGreaterThan(0);
      expect(typeof row.kb_per_task).toBe("number");
    }

    expect(report.payloads).toHaveLength(12);
    expect(new Set(report.payloads.map((row: { text_bytes: number }) => row.text_bytes))).toEqual(new Set([1024, 65536, 1048576]));
    for (const row of report.payloads) {
      expect(row.requests, `${row.text_bytes} bytes to ${row.contender}`).toBeGreaterThan(0);
      expect(row.errors, `${row.text_bytes} bytes to ${row.contender}`).toBe(0);
    }

    expect(report.fanout.runs).toHaveLength(1); // one per round, each on a fresh server
    const [fanout] = report.fanout.runs;
    expect(fanout).not.toHaveProperty("failed");
    expect(fanout).toMatchObject({ watchers: 100, opened: 100, received: 100, errors: 0 });
    expect(fanout.fanout_ms).toBeGreaterThan(0);
    expect(fanout.send_ms).toBeGreaterThan(0);
    expect(report.fanout.fanout_ms).toEqual({ median: fanout.fanout_ms, min: fanout.fanout_ms, max: fanout.fanout_ms });
    expect(report.fanout.send_ms).toBe(fanout.send_ms);

    // The bare unary call on each Synapse server (Health/Check): counted, and answered SERVING every time.
    expect(report.bare_calls.map((call: { contender: string }) => call.contender)).toEqual(["synapse-sqlite", "synapse-memory", "synapse-a2a"]);
    for (const call of report.bare_calls) {
      expect(call.calls, call.contender).toBeGreaterThan(0);
      expect(call.errors, call.contender).toBe(0);
      expect(call.server_cpu_us_per_call, call.contender).toBeGreaterThan(0);
    }

    expect(report.targets.length).toBeGreaterThanOrEqual(18);
    // The A2A face runs A2A-js's own workload: judged on tasks/s, server CPU per task and p99 against it, not on the signed workload's aims.
    const a2aTargets = report.targets.map((check: { target: string }) => check.target).filter((target: string) => target.includes("(synapse-a2a"));
    expect(a2aTargets).toEqual([
      "A2A gRPC rps ratio >= 1.0 (synapse-a2a)",
      "A2A JSON-RPC rps ratio >= 1.0 (synapse-a2a)",
      "server CPU per A2A task <= A2A-js's (synapse-a2a, grpc)",
      "server CPU per A2A task <= A2A-js's (synapse-a2a, jsonrpc)",
      "p99 no worse than A2A-js grpc (synapse-a2a, grpc)",
      "p99 no worse than A2A-js jsonrpc (synapse-a2a, jsonrpc)",
    ]);
    expect(report.targets.filter((check: { target: string }) => check.target.startsWith("1 MiB text")).map((check: { target: string }) => check.target)).toEqual([
      "1 MiB text, gRPC tasks/s ratio >= 1.0 (synapse-sqlite)",
      "1 MiB text, gRPC tasks/s ratio >= 1.0 (synapse-memory)",
    ]);
    for (const check of report.targets) expect(check).toMatchObject({ target: expect.any(String), value: expect.any(String), pass: expect.any(Boolean) });
  }, 150_000);

  it("hands --serve-flags to the Synapse servers it starts (a flag synapse serve refuses stops the run)", async () => {
    const { code, stderr } = await runBench(["--peer", "--rounds", "1", "--seconds", "1", "--tasks", "10", "--watchers", "10", "--serve-flags=--no-such-flag", "--json"]);
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/no-such-flag/);
  }, 60_000);
});
