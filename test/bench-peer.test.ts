// The peer bench's options and the judgements its report makes, as pure
// functions. The bench itself, end to end, is test/e2e/bench-peer-run.test.ts
// (npm run test:bench).
import { describe, expect, it } from "vitest";
import { BenchUsageError, parseBenchArgs } from "../bench/args.js";
import type { WatchLine } from "../bench/peer/loadgen.js";
import { judge, sharedCores, type FanoutRun, type PayloadRow, type PeerSummaryRow, type Ratio } from "../bench/peer/report.js";

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
