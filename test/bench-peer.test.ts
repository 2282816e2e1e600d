// `npm run bench -- peer` end to end in a tiny configuration: real child
// servers (synapse serve on SQLite and memory, the A2A-js peer), the Go load
// generator over real sockets, and a Watch fan-out of 100 streams. It checks
// the report's shape and that every contender completed requests without an
// error; no timing is asserted. Without Go the load generator cannot be
// built, and the test says so and is skipped.
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BenchUsageError, parseBenchArgs } from "../bench/args.js";
import type { WatchLine } from "../bench/peer/loadgen.js";
import { judge, sharedCores, type FanoutRun, type PayloadRow, type PeerSummaryRow, type Ratio } from "../bench/peer/report.js";

const RUN = fileURLToPath(new URL("../dist/bench/run.js", import.meta.url));
const hasGo = spawnSync("go", ["version"]).status === 0;
if (!hasGo) console.warn("bench-peer.test.ts: Go is not installed (go not on PATH), so the peer bench's end-to-end test is skipped");

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

describe("bench peer options", () => {
  it("takes peer as a mode or as --peer, with its own defaults", () => {
    expect(parseBenchArgs(["peer"])).toMatchObject({ mode: "peer", rounds: 3, seconds: 5, concurrency: 64, peerTasks: 50_000, watchers: 10_000 });
    expect(parseBenchArgs(["--peer", "--tasks", "2000", "--watchers", "100", "--rounds", "1"])).toMatchObject({ mode: "peer", peerTasks: 2000, watchers: 100, rounds: 1 });
    expect(parseBenchArgs(["stores"]).rounds).toBe(5);
    expect(() => parseBenchArgs(["stores", "--peer"])).toThrow(BenchUsageError);
    expect(() => parseBenchArgs(["peer", "--stores", "sqlite"])).toThrow(BenchUsageError);
    expect(() => parseBenchArgs(["stores", "--watchers", "10"])).toThrow(BenchUsageError);
    expect(parseBenchArgs(["peer", "--serve-flags=--heap-growth 0"]).serveFlags).toEqual(["--heap-growth", "0"]);
    expect(() => parseBenchArgs(["stores", "--serve-flags=--heap-growth 0"])).toThrow(BenchUsageError);
  });
});

describe("the fan-out target", () => {
  const run = (fanoutMs: number, extra: Partial<WatchLine> = {}): WatchLine => ({
    mode: "synapse-watch",
    watchers: 10,
    connections: 1,
    opened: 10,
    open_ms: 100,
    send_ms: 5,
    received: 10,
    fanout_ms: fanoutMs,
    fanout_p50_ms: fanoutMs / 2,
    heartbeats: 0,
    open_cpu_ms: null,
    fanout_cpu_ms: null,
    errors: 0,
    ...extra,
  });
  const check = (runs: FanoutRun[], fanoutMs: Ratio | null) => {
    const report = { config: {}, floor: { message_bytes: 600, implementation: "x", sign_us: 1, verify_us: 1, floor_us: 2 }, summary: [], memory: [], payloads: [], bare_calls: [], notes: [], turns: [] };
    const fanout = { server: "s", runs, fanout_ms: fanoutMs, fanout_p50_ms: null, open_ms: null, send_ms: null };
    return judge({ ...report, fanout }).find((c) => c.target.startsWith("Watch fan-out"))!;
  };

  it("is judged on the median of the runs, each of which must reach every stream", () => {
    expect(check([run(300), run(900), run(400)], { median: 400, min: 300, max: 900 })).toMatchObject({ pass: true, value: "400 ms (300-900)" });
    expect(check([run(300), run(900), run(600)], { median: 600, min: 300, max: 900 })).toMatchObject({ pass: false });
    expect(check([run(300), run(300, { received: 9 }), run(300)], { median: 300, min: 300, max: 300 })).toMatchObject({ pass: false });
    expect(check([run(300), { failed: "no server" }], { median: 300, min: 300, max: 300 }).pass).toBe(false);
    expect(check([{ failed: "no server" }], null)).toMatchObject({ pass: false, value: "no run completed" });
  });
});

describe("the large-payload target", () => {
  const payload = (contender: PayloadRow["contender"], textBytes: number, rpsVsPeer: number | null, errors = 0): PayloadRow => ({
    text_bytes: textBytes,
    contender,
    requests: 10,
    errors,
    rps: 10,
    p50_ms: 1,
    p99_ms: 1,
    rps_vs_peer: rpsVsPeer,
  });
  const checks = (payloads: PayloadRow[]) => {
    const report = { config: {}, floor: { message_bytes: 600, implementation: "x", sign_us: 1, verify_us: 1, floor_us: 2 }, summary: [], memory: [], bare_calls: [], notes: [], turns: [] };
    const fanout = { server: "s", runs: [], fanout_ms: null, fanout_p50_ms: null, open_ms: null, send_ms: null };
    return judge({ ...report, payloads, fanout }).filter((c) => c.target.startsWith("1 MiB text"));
  };

  it("judges each Synapse store's tasks/s at 1 MiB of text against A2A-js's, failed requests failing it", () => {
    const MiB = 1024 * 1024;
    const judged = checks([payload("synapse-sqlite", 64 * 1024, 0.5), payload("synapse-sqlite", MiB, 1.12), payload("synapse-memory", MiB, 0.97), payload("a2a-js", MiB, null)]);
    expect(judged).toEqual([
      { target: "1 MiB text, gRPC tasks/s ratio >= 1.0 (synapse-sqlite)", value: "1.12x", pass: true },
      { target: "1 MiB text, gRPC tasks/s ratio >= 1.0 (synapse-memory)", value: "0.97x", pass: false },
    ]);
    expect(checks([payload("synapse-sqlite", MiB, 1.5, 1)])[0]!.pass).toBe(false);
    expect(checks([payload("synapse-sqlite", MiB, null)])[0]).toMatchObject({ value: "no peer figure", pass: false });
  });
});

describe("the shared-cores line", () => {
  const row = (contender: PeerSummaryRow["contender"], protocol: PeerSummaryRow["protocol"], family: PeerSummaryRow["family"], server: number | null, generator: number | null): PeerSummaryRow => ({
    contender,
    protocol,
    family,
    rounds: 1,
    requests: 1,
    errors: 0,
    rps: 1,
    p50_ms: 1,
    p99_ms: 1,
    server_cpu_us_per_request: server,
    generator_cpu_us_per_request: generator,
    cpu_vs_floor: null,
    rps_vs_peer: null,
    cpu_vs_peer: null,
  });

  it("sets server + generator CPU per task against A2A-js's, per protocol family, and says what parity needs", () => {
    const lines = sharedCores([row("synapse-sqlite", "grpc", "grpc", 500, 125), row("synapse-sqlite", "connect-json", "json", 480, null), row("a2a-js", "grpc", "grpc", 225, 50), row("a2a-js", "jsonrpc", "json", 330, 110)]);
    expect(lines).toEqual(["  synapse-sqlite grpc: 500 + 125 = 625 us, a2a-js grpc: 225 + 50 = 275 us: the cores allow 0.44x; 1.0x needs the server at <= 150 us per task"]);
    // With the run's Ed25519 floor and bare calls: what parity leaves after them (the bare call is a gRPC one, so only gRPC rows count it).
    const bare = { contender: "synapse-memory" as const, calls: 100, errors: 0, rps: 1000, server_cpu_us_per_call: 60 };
    expect(sharedCores([row("synapse-memory", "grpc", "grpc", 400, 100), row("synapse-memory", "connect-json", "json", 450, 150), row("a2a-js", "grpc", "grpc", 250, 50), row("a2a-js", "jsonrpc", "json", 330, 110)], { sign_us: 15, verify_us: 40 }, [bare])).toEqual([
      "  synapse-memory grpc: 400 + 100 = 500 us, a2a-js grpc: 250 + 50 = 300 us: the cores allow 0.60x; 1.0x needs the server at <= 200 us per task, of which its own Ed25519 work (1 verify + 2 signs at this run's floor) takes 70 us and a bare unary call on this server 60 us: 70 us left for the rest",
      "  synapse-memory connect-json: 450 + 150 = 600 us, a2a-js jsonrpc: 330 + 110 = 440 us: the cores allow 0.73x; 1.0x needs the server at <= 290 us per task, of which its own Ed25519 work (1 verify + 2 signs at this run's floor) takes 70 us: 220 us left for the rest",
    ]);
  });
});

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
