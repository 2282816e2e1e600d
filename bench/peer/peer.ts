// npm run bench -- peer: Synapse and the official A2A JavaScript SDK side by
// side in one run. Each server is its own child process on 127.0.0.1; one Go
// load generator (bench/peer/loadgen) drives them all with the same task
// (text_analysis of the same text), closed loop, the same concurrency. In
// order:
//   1. the Ed25519 floor (the server's implementation, one sign + one verify) in this process;
//   2. interleaved rounds: each round runs every contender over each of its
//      protocols once (order rotated by round); medians and per-round ratios;
//   3. memory: every server is brought to --tasks completed tasks, then its
//      RSS is set against its RSS at idle start;
//   4. payload sizes: a short gRPC turn per contender with 1 KiB, 64 KiB and
//      1 MiB of text;
//   5. a bare unary call (grpc.health.v1.Health/Check) on each Synapse
//      server: what its transport costs any call;
//   6. Watch fan-out on a fresh `synapse serve` (default store).
import { randomBytes } from "node:crypto";
import { defaultEd25519 } from "../../src/crypto/ed25519.js";
import type { BenchOptions } from "../args.js";
import { startChildServer } from "../child-server.js";
import { median } from "../stores.js";
import { COMMON_SERVE_ARGS } from "../store-targets.js";
import { TEXT } from "../workloads.js";
import { CONTENDER_NOTES, CONTENDERS, PEER, startContender, type Contender, type ContenderName, type Target } from "./contenders.js";
import { measureFloor, type Ed25519Floor } from "./floor.js";
import { buildLoadgen, goVersion, runLoadgen, type Loadgen, type LoadLine, type WatchLine } from "./loadgen.js";
import { completeRun, judge, type BareCallRow, type FanoutResult, type FanoutRun, type MemoryRow, type PayloadRow, type PeerReport, type PeerSummaryRow, type PeerTurn, type Ratio } from "./report.js";

type Progress = (message: string) => void;

// Warm-ups and the floor's measurement shrink with --seconds below 2 (quick runs, the test).
const FIRST_WARMUP_SECONDS = 2;
const WARMUP_SECONDS = 1;
const FLOOR_SECONDS = 1;
const PAYLOAD_WARMUP_SECONDS = 0.5;
export const PAYLOAD_BYTES = [1024, 64 * 1024, 1024 * 1024] as const;
/** Watch streams per HTTP/2 connection at most. */
const STREAMS_PER_CONNECTION = 500;
/** The fan-out server's heartbeat interval: long enough that no heartbeat falls into the measurement. */
const FANOUT_HEARTBEAT_SECONDS = 600;

const mib = (bytes: number) => bytes / 2 ** 20;
const rotated = <T>(items: readonly T[], by: number): T[] => items.map((_, i) => items[(i + by) % items.length] as T);
const spread = (values: number[]): Ratio | null => (values.length === 0 ? null : { median: median(values), min: Math.min(...values), max: Math.max(...values) });

/** The floor is a least cost: on a shared machine the lower of two measurements is the nearer. */
function lowerFloor(a: Ed25519Floor, b: Ed25519Floor): Ed25519Floor {
  const signUs = Math.min(a.sign_us, b.sign_us);
  const verifyUs = Math.min(a.verify_us, b.verify_us);
  return { message_bytes: a.message_bytes, implementation: a.implementation, sign_us: signUs, verify_us: verifyUs, floor_us: signUs + verifyUs };
}

class Run {
  /** Requests each server has completed, warm-ups included. */
  readonly served = new Map<ContenderName, number>();
  readonly firstWarmup: number;
  readonly warmup: number;
  readonly payloadWarmup: number;
  constructor(
    readonly loadgen: Loadgen,
    readonly options: BenchOptions,
    readonly seed: string,
    readonly progress: Progress,
  ) {
    const scale = Math.min(1, options.seconds / 2);
    this.firstWarmup = FIRST_WARMUP_SECONDS * scale;
    this.warmup = WARMUP_SECONDS * scale;
    this.payloadWarmup = PAYLOAD_WARMUP_SECONDS * scale;
  }

  /** One load-generator run against `target`, counted toward its server's tasks. */
  async load(target: Target, contender: Contender, extra: string[]): Promise<LoadLine> {
    const args = ["-mode", target.mode, "-target", target.url, "-pid", String(contender.pid), "-seed", this.seed, "-text", TEXT, "-concurrency", String(this.options.concurrency), ...extra];
    const line = await runLoadgen<LoadLine>(this.loadgen, args);
    this.served.set(contender.name, (this.served.get(contender.name) ?? 0) + line.requests + line.warmup_requests);
    return line;
  }
}

function toTurn(round: number, target: Target, line: LoadLine): PeerTurn {
  return {
    round,
    contender: target.contender,
    protocol: target.protocol,
    family: target.family,
    requests: line.requests,
    errors: line.errors,
    seconds: line.seconds,
    rps: line.rps,
    p50_ms: line.p50_ms,
    p99_ms: line.p99_ms,
    server_cpu_us_per_request: line.server_cpu_ms === null || line.requests === 0 ? null : (line.server_cpu_ms * 1000) / line.requests,
    generator_cpu_us_per_request: line.generator_cpu_ms == null || line.requests === 0 ? null : (line.generator_cpu_ms * 1000) / line.requests,
    ...(line.first_error ? { first_error: line.first_error } : {}),
  };
}

async function rounds(run: Run, contenders: Contender[]): Promise<PeerTurn[]> {
  const targets = contenders.flatMap((contender) => [contender.grpc, contender.json].map((target) => ({ target, contender })));
  run.progress(`first warm-up: ${run.firstWarmup} s per contender and protocol`);
  for (const { target, contender } of targets) await run.load(target, contender, ["-warmup", "0", "-seconds", String(run.firstWarmup)]);
  const turns: PeerTurn[] = [];
  for (let round = 1; round <= run.options.rounds; round++) {
    const order = rotated(targets, round - 1);
    run.progress(`round ${round} of ${run.options.rounds}: ${order.map(({ target }) => `${target.contender}/${target.protocol}`).join(", ")}; ${run.warmup} s warm-up + ${run.options.seconds} s each`);
    for (const { target, contender } of order) {
      const turn = toTurn(round, target, await run.load(target, contender, ["-warmup", String(run.warmup), "-seconds", String(run.options.seconds)]));
      const cpu = turn.server_cpu_us_per_request === null ? "" : `, server CPU ${turn.server_cpu_us_per_request.toFixed(0)} us/task`;
      run.progress(`round ${round}: ${target.contender} over ${target.protocol}: ${turn.rps.toFixed(0)}/s, p50 ${turn.p50_ms.toFixed(1)} ms, p99 ${turn.p99_ms.toFixed(1)} ms${cpu}${turn.errors ? `, ${turn.errors} ERRORS` : ""}`);
      turns.push(turn);
    }
  }
  return turns;
}

function summarize(turns: PeerTurn[], floorUs: number): PeerSummaryRow[] {
  const rows: PeerSummaryRow[] = [];
  for (const contender of CONTENDERS) {
    for (const family of ["grpc", "json"] as const) {
      const mine = turns.filter((turn) => turn.contender === contender && turn.family === family);
      if (mine.length === 0) continue;
      const peerIn = (round: number) => turns.find((turn) => turn.contender === PEER && turn.family === family && turn.round === round);
      const rpsRatios: number[] = [];
      const cpuRatios: number[] = [];
      for (const turn of mine) {
        const peer = peerIn(turn.round);
        if (contender === PEER || peer === undefined) continue;
        if (peer.rps > 0) rpsRatios.push(turn.rps / peer.rps);
        if (turn.server_cpu_us_per_request !== null && peer.server_cpu_us_per_request) cpuRatios.push(turn.server_cpu_us_per_request / peer.server_cpu_us_per_request);
      }
      const cpu = mine.flatMap((turn) => (turn.server_cpu_us_per_request === null ? [] : [turn.server_cpu_us_per_request]));
      const cpuMedian = cpu.length === 0 ? null : median(cpu);
      const generator = mine.flatMap((turn) => (turn.generator_cpu_us_per_request === null ? [] : [turn.generator_cpu_us_per_request]));
      rows.push({
        contender,
        protocol: mine[0]!.protocol,
        family,
        rounds: mine.length,
        requests: mine.reduce((sum, turn) => sum + turn.requests, 0),
        errors: mine.reduce((sum, turn) => sum + turn.errors, 0),
        rps: median(mine.map((turn) => turn.rps)),
        p50_ms: median(mine.map((turn) => turn.p50_ms)),
        p99_ms: median(mine.map((turn) => turn.p99_ms)),
        server_cpu_us_per_request: cpuMedian,
        generator_cpu_us_per_request: generator.length === 0 ? null : median(generator),
        cpu_vs_floor: cpuMedian === null ? null : cpuMedian / floorUs,
        rps_vs_peer: spread(rpsRatios),
        cpu_vs_peer: spread(cpuRatios),
      });
    }
  }
  return rows;
}

async function memory(run: Run, contenders: Contender[], idle: Map<ContenderName, number>): Promise<MemoryRow[]> {
  const rows: MemoryRow[] = [];
  for (const contender of contenders) {
    const need = run.options.peerTasks - (run.served.get(contender.name) ?? 0);
    if (need > 0) {
      run.progress(`${contender.name}: ${need} more tasks over gRPC to reach ${run.options.peerTasks}`);
      const line = await run.load(contender.grpc, contender, ["-warmup", "0", "-count", String(need)]);
      if (line.errors > 0) run.progress(`${contender.name}: ${line.errors} errors in the top-up (first: ${line.first_error})`);
    }
    const tasks = run.served.get(contender.name) ?? 0;
    const rss = contender.sample().rssBytes;
    const rssIdle = idle.get(contender.name) ?? 0;
    rows.push({ contender: contender.name, tasks, rss_idle_mib: mib(rssIdle), rss_mib: mib(rss), kb_per_task: tasks === 0 ? 0 : (rss - rssIdle) / 1024 / tasks });
    run.progress(`${contender.name}: RSS ${mib(rss).toFixed(1)} MiB after ${tasks} tasks (idle ${mib(rssIdle).toFixed(1)} MiB)`);
  }
  return rows;
}

async function payloads(run: Run, contenders: Contender[], seconds: number): Promise<PayloadRow[]> {
  const rows: PayloadRow[] = [];
  for (const [index, bytes] of PAYLOAD_BYTES.entries()) {
    const measured = new Map<ContenderName, LoadLine>();
    for (const contender of rotated(contenders, index)) {
      const line = await run.load(contender.grpc, contender, ["-text-bytes", String(bytes), "-warmup", String(run.payloadWarmup), "-seconds", String(seconds)]);
      run.progress(`${bytes} bytes of text: ${contender.name} over gRPC: ${line.rps.toFixed(0)}/s, p99 ${line.p99_ms.toFixed(1)} ms${line.errors ? `, ${line.errors} ERRORS` : ""}`);
      measured.set(contender.name, line);
    }
    const peer = measured.get(PEER);
    for (const contender of contenders) {
      const line = measured.get(contender.name)!;
      rows.push({
        text_bytes: bytes,
        contender: contender.name,
        requests: line.requests,
        errors: line.errors,
        rps: line.rps,
        p50_ms: line.p50_ms,
        p99_ms: line.p99_ms,
        rps_vs_peer: contender.name === PEER || peer === undefined || peer.rps === 0 ? null : line.rps / peer.rps,
        ...(line.first_error ? { first_error: line.first_error } : {}),
      });
    }
  }
  return rows;
}

/** Health/Check in a closed loop on each Synapse server, as long as a payload turn: no envelope, no store, no signature. */
async function bareCalls(run: Run, contenders: Contender[], seconds: number): Promise<BareCallRow[]> {
  const rows: BareCallRow[] = [];
  for (const contender of contenders.filter((c) => c.name !== PEER)) {
    const args = ["-mode", "grpc-health", "-target", contender.grpc.url, "-pid", String(contender.pid), "-concurrency", String(run.options.concurrency), "-warmup", String(run.payloadWarmup), "-seconds", String(seconds)];
    const line = await runLoadgen<LoadLine>(run.loadgen, args);
    const cpuUs = line.server_cpu_ms === null || line.requests === 0 ? null : (line.server_cpu_ms * 1000) / line.requests;
    run.progress(`bare unary call (Health/Check): ${contender.name}: ${line.rps.toFixed(0)}/s, server CPU ${cpuUs === null ? "-" : cpuUs.toFixed(0)} us/call${line.errors ? `, ${line.errors} ERRORS` : ""}`);
    rows.push({ contender: contender.name, calls: line.requests, errors: line.errors, rps: line.rps, server_cpu_us_per_call: cpuUs, ...(line.first_error ? { first_error: line.first_error } : {}) });
  }
  return rows;
}

/**
 * The Watch fan-out, once per round, each time on a fresh server: one run
 * swings by a factor of two on a shared machine (GC, the generator's own
 * turn), so the target is judged on the median.
 */
async function fanout(run: Run): Promise<FanoutResult> {
  const serveFlags = run.options.serveFlags;
  const server = `synapse serve, default store (SQLite), --heartbeat-interval ${FANOUT_HEARTBEAT_SECONDS}${serveFlags.map((flag) => ` ${flag}`).join("")}`;
  const connections = Math.max(1, Math.ceil(run.options.watchers / STREAMS_PER_CONNECTION));
  const runs: FanoutRun[] = [];
  for (let round = 1; round <= run.options.rounds; round++) {
    const child = await startChildServer({
      label: "fanout",
      args: ["--heartbeat-interval", String(FANOUT_HEARTBEAT_SECONDS), ...COMMON_SERVE_ARGS, ...serveFlags],
      onStderr: (line) => run.progress(`[fan-out server] ${line}`),
    });
    try {
      run.progress(`Watch fan-out ${round} of ${run.options.rounds}: ${run.options.watchers} streams over ${connections} connections to ${child.url} (pid ${child.pid})`);
      const args = ["-mode", "synapse-watch", "-target", child.url, "-pid", String(child.pid), "-seed", run.seed, "-text", TEXT, "-watchers", String(run.options.watchers), "-conns", String(connections), "-timeout", "5m"];
      const line = await runLoadgen<WatchLine>(run.loadgen, args);
      run.progress(`Watch fan-out ${round}: opened in ${line.open_ms.toFixed(0)} ms; event at all ${line.received} streams after ${line.fanout_ms.toFixed(0)} ms; Send took ${line.send_ms.toFixed(0)} ms`);
      runs.push(line);
    } catch (error) {
      const failed = error instanceof Error ? error.message : String(error);
      run.progress(`Watch fan-out ${round} FAILED: ${failed}`);
      runs.push({ failed });
    } finally {
      await child.stop();
    }
  }
  const complete = runs.filter(completeRun);
  const middle = (values: number[]) => (values.length === 0 ? null : median(values));
  return {
    server,
    runs,
    fanout_ms: spread(complete.map((line) => line.fanout_ms)),
    fanout_p50_ms: middle(complete.map((line) => line.fanout_p50_ms)),
    open_ms: middle(complete.map((line) => line.open_ms)),
    send_ms: middle(complete.map((line) => line.send_ms)),
  };
}

export async function peerBench(options: BenchOptions, progress: Progress): Promise<PeerReport> {
  const loadgen = buildLoadgen(progress);
  const contenders: Contender[] = [];
  try {
    const floorSeconds = Math.min(FLOOR_SECONDS, options.seconds / 2);
    progress(`Ed25519 floor: ${defaultEd25519.name} sign and verify, ${floorSeconds} s each (again at the end; the lower figures count)`);
    const firstFloor = measureFloor(TEXT, floorSeconds);
    for (const name of CONTENDERS) contenders.push(await startContender(name, progress, options.serveFlags));
    const idle = new Map(contenders.map((contender) => [contender.name, contender.sample().rssBytes] as const));
    const run = new Run(loadgen, options, randomBytes(32).toString("hex"), progress);
    const turns = await rounds(run, contenders);
    const memoryRows = await memory(run, contenders, idle);
    const payloadSeconds = Math.min(2, options.seconds);
    const payloadRows = await payloads(run, contenders, payloadSeconds);
    const bareCallRows = await bareCalls(run, contenders, payloadSeconds);
    for (const contender of contenders.splice(0)) await contender.stop();
    const fanoutResult = await fanout(run);
    const floor = lowerFloor(firstFloor, measureFloor(TEXT, floorSeconds));
    const report: Omit<PeerReport, "targets"> = {
      config: {
        rounds: options.rounds,
        seconds: options.seconds,
        warmup_seconds: run.warmup,
        concurrency: options.concurrency,
        tasks: options.peerTasks,
        payload_seconds: payloadSeconds,
        watchers: options.watchers,
        task: `text_analysis of a ${TEXT.length}-character text, waited to completion (Synapse: signed task_request, Send with wait; A2A, a2a-js and synapse-a2a alike: SendMessage, blocking, unsigned)`,
        load_generator: `bench/peer/loadgen (${goVersion() ?? "go"}), closed loop, gRPC over one HTTP/2 connection, JSON over one HTTP/1.1 keep-alive connection per worker`,
        ids: "Synapse requests carry time-ordered UUIDv7 task and message ids, as Synapse's clients make them (the load generator's -ids v4 sends random ones); A2A requests random UUIDv4 ids",
        node: process.version,
        synapse_serve_flags: options.serveFlags.length === 0 ? "none (the defaults)" : options.serveFlags.join(" "),
      },
      floor,
      summary: summarize(turns, floor.floor_us),
      memory: memoryRows,
      payloads: payloadRows,
      bare_calls: bareCallRows,
      fanout: fanoutResult,
      notes: [
        `Medians over ${options.rounds} interleaved rounds (order rotated each round); each ratio is Synapse over A2A-js in the same round (gRPC vs gRPC, Connect JSON vs JSON-RPC; for synapse-a2a JSON-RPC vs JSON-RPC), then the median.`,
        "Server CPU: user + system time of the server process over the measured seconds, per completed task. The load generator's signing and verifying is not counted.",
        "Shared CPUs: the load generator and the server share the machine; figures are noisy, compare ratios, not absolutes.",
        "Synapse does more per task: it verifies the request's signature, records the task durably (sqlite) and signs every event and its reply; the A2A-js peer signs nothing.",
        "synapse-a2a runs the A2A-js workload itself (the same requests, nothing signed or verified by the load generator): the task goes through the engine like any other, recorded durably in SQLite with its executor-signed event log, so the comparison is of engine, transport and store.",
        "KB/task: (RSS after the load - RSS at idle start) / tasks served; a fresh process's heap sizing counts in it.",
        "contenders:",
        ...CONTENDERS.map((name) => `  ${name}: ${CONTENDER_NOTES[name]}`),
      ],
      turns,
    };
    return { ...report, targets: judge(report) };
  } finally {
    for (const contender of contenders) await contender.stop();
    loadgen.remove();
  }
}
