// npm run bench -- confidential: what sealing a task (docs/PROTOCOL.md §9)
// costs the server, against the same task sent plain. One `synapse serve`
// child process (memory store, its own data dir), so its CPU time is its own;
// the requesters, signing and sealing, are this process. Two parts, each in
// interleaved rounds with the order swapped every round:
//   - CPU per task: N signed text_analysis tasks plain, N confidential, each
//     submitted with a wait and checked COMPLETED; server CPU per task and tasks/s.
//   - a 1 MiB result: a data_analysis with include_rows, read back through
//     ReadResult and opened; result MiB/s from submit to opened bytes.
import type { JsonObject } from "@bufbuild/protobuf";
import { performance } from "node:perf_hooks";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState, type ResultStream } from "../gen/synapse/v1/payloads_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { SynapseClient } from "../src/client/requester.js";
import type { BenchOptions } from "./args.js";
import { startChildServer, type ChildServer } from "./child-server.js";
import type { ConfidentialReport, CpuPart, CpuRound, Kind, ResultPart, ResultRound, Spread } from "./confidential-report.js";
import { runCount, type Call } from "./measure.js";
import { COMMON_SERVE_ARGS } from "./store-targets.js";
import { median } from "./stores.js";
import { temporaryRequester, TEXT } from "./workloads.js";

type Progress = (message: string) => void;

export const KINDS: readonly Kind[] = ["plain", "confidential"];
/**
 * Warm-up before the first round, not counted, in rounds' worth of tasks of
 * each kind: the server's code paths are still being optimized over the
 * first thousand tasks, and a shorter warm-up (100 at the default 400 per
 * round) showed as plain getting faster round by round.
 */
const WARMUP_ROUNDS = 2.5;
const WARMUP_TURNS = 4;
const WARMUP_RESULTS = 2;
/** The result stream the data_analysis task is sized to. */
export const RESULT_TARGET_BYTES = 1024 * 1024;
/** Results of each kind read per round, one after another. */
const RESULTS_PER_ROUND = 3;
const WAIT_MS = 30_000;

/** The round's order: plain first in even rounds, confidential first in odd ones. */
const ordered = (round: number): Kind[] => (round % 2 === 0 ? [...KINDS] : [...KINDS].reverse());

/** Submit options of each kind. */
const sealing = (kind: Kind) => (kind === "confidential" ? { confidential: true as const } : {});

/** Throws unless the reply is a task_confirm for a COMPLETED task, sealed exactly when the kind says so. */
function checkCompleted(kind: Kind, taskId: string, sent: Awaited<ReturnType<SynapseClient["submit"]>>): void {
  const { reply, task } = sent;
  if (reply?.type !== MessageType.TASK_CONFIRM || task?.state !== TaskState.COMPLETED) {
    throw new Error(`${kind} task ${taskId} ended as ${task ? TaskState[task.state] : "no task"} (reply ${reply ? MessageType[reply.type] : "none"})`);
  }
  // Measuring plain twice would show no cost at all.
  const sealed = (reply.header.confidential?.taskKeyId ?? "") !== "";
  if (sealed !== (kind === "confidential")) throw new Error(`${kind} task ${taskId}: its reply was ${sealed ? "" : "not "}sealed`);
}

function textCall(client: SynapseClient, kind: Kind): Call {
  return async () => {
    const sent = await client.submit("text_analysis", { text: TEXT }, { ...sealing(kind), waitMs: WAIT_MS });
    checkCompleted(kind, sent.taskId, sent);
  };
}

/**
 * A CSV whose data_analysis result with include_rows is about `targetBytes`
 * of JSON: its rows are added until their JSON (as the handler writes them,
 * numeric cells as numbers) reaches the target less room for the statistics.
 */
export function resultCsv(targetBytes: number): { csv: string; rows: number } {
  const lines = ["id,amount,code"];
  // {"rows":N,"columns":{three columns' count, min, max, mean},"parsed_rows":[...]} around the rows.
  const statsRoom = 240;
  let bytes = statsRoom;
  let rows = 0;
  while (bytes < targetBytes) {
    rows++;
    const row = { id: rows, amount: (rows * 7919) % 1_000_000, code: `k${rows.toString(36).padStart(6, "0")}` };
    lines.push(`${row.id},${row.amount},${row.code}`);
    bytes += JSON.stringify(row).length + 1; // and its comma
  }
  return { csv: `${lines.join("\n")}\n`, rows };
}

interface Transfer {
  /** Submit to opened bytes, ms. */
  ms: number;
  opened: Uint8Array;
  /** The stream as ReadResult sent it (sealed records, for a confidential task). */
  stream: ResultStream;
}

async function transfer(client: SynapseClient, kind: Kind, payload: JsonObject, rows: number): Promise<Transfer> {
  const t0 = performance.now();
  const sent = await client.submit("data_analysis", payload, { ...sealing(kind), waitMs: WAIT_MS });
  checkCompleted(kind, sent.taskId, sent);
  // A confidential task's Send reply shows its state only: its result is read from its sealed events.
  const task = kind === "confidential" ? await client.getTask(sent.taskId) : sent.task;
  const stream = task?.result?.stream;
  if (stream === undefined) throw new Error(`${kind} task ${sent.taskId} offers no result stream`);
  const opened = await client.readResult(sent.taskId, { expected: stream });
  const ms = performance.now() - t0;
  const parsed = JSON.parse(Buffer.from(opened).toString("utf8")) as { parsed_rows?: unknown };
  if (!Array.isArray(parsed.parsed_rows) || parsed.parsed_rows.length !== rows) {
    throw new Error(`${kind} task ${sent.taskId}: parsed_rows has ${Array.isArray(parsed.parsed_rows) ? parsed.parsed_rows.length : "no"} rows, ${rows} were sent`);
  }
  return { ms, opened, stream };
}

interface Run {
  server: ChildServer;
  clients: Map<Kind, SynapseClient>;
  options: BenchOptions;
  progress: Progress;
}

async function cpuRound(run: Run, kind: Kind, round: number): Promise<CpuRound> {
  const call = textCall(run.clients.get(kind)!, kind);
  const before = run.server.sample();
  const result = await runCount(call, run.options.concurrency, run.options.confidentialTasks);
  const after = run.server.sample();
  const row: CpuRound = {
    round: round + 1,
    kind,
    tasks: result.requests,
    seconds: result.seconds,
    tasks_per_s: result.rps,
    p50_ms: result.p50Ms,
    p99_ms: result.p99Ms,
    server_cpu_ms_per_task: (after.cpuMs - before.cpuMs) / result.requests,
  };
  run.progress(`round ${round + 1}: ${kind} text_analysis: ${row.tasks_per_s.toFixed(0)} tasks/s, server ${row.server_cpu_ms_per_task.toFixed(2)} ms CPU per task`);
  return row;
}

async function resultRound(run: Run, kind: Kind, round: number, payload: JsonObject, rows: number, plainBytes: Uint8Array): Promise<ResultRound> {
  const client = run.clients.get(kind)!;
  const before = run.server.sample();
  let ms = 0;
  let resultBytes = 0;
  let streamBytes = 0;
  for (let i = 0; i < RESULTS_PER_ROUND; i++) {
    const done = await transfer(client, kind, payload, rows);
    // The same CSV gives the same result: sealed or not, the opened bytes are the plain ones.
    if (Buffer.compare(Buffer.from(done.opened), Buffer.from(plainBytes)) !== 0) throw new Error(`${kind} result differs from the plain task's`);
    ms += done.ms;
    resultBytes += done.opened.byteLength;
    streamBytes = Number(done.stream.totalSize);
  }
  const after = run.server.sample();
  const row: ResultRound = {
    round: round + 1,
    kind,
    results: RESULTS_PER_ROUND,
    result_bytes: resultBytes / RESULTS_PER_ROUND,
    stream_bytes: streamBytes,
    ms_per_result: ms / RESULTS_PER_ROUND,
    mib_per_s: resultBytes / (1024 * 1024) / (ms / 1000),
    server_cpu_ms_per_result: (after.cpuMs - before.cpuMs) / RESULTS_PER_ROUND,
  };
  run.progress(`round ${round + 1}: ${kind} 1 MiB result: ${row.mib_per_s.toFixed(1)} MiB/s, ${row.ms_per_result.toFixed(0)} ms each`);
  return row;
}

async function connect(url: string, identity: AgentIdentity): Promise<SynapseClient> {
  return SynapseClient.connect({ baseUrl: url, identity, transport: { protocol: "grpc" } });
}

export async function confidentialBench(options: BenchOptions, progress: Progress): Promise<ConfidentialReport> {
  const requester = await temporaryRequester();
  const server = await startChildServer({
    label: "confidential",
    args: ["--store", "memory", ...COMMON_SERVE_ARGS],
    onStderr: (line) => progress(`[server] ${line}`),
  });
  progress(`synapse serve pid ${server.pid} at ${server.url}`);
  const cpu: CpuRound[] = [];
  const results: ResultRound[] = [];
  const { csv, rows } = resultCsv(RESULT_TARGET_BYTES);
  const payload: JsonObject = { csv, include_rows: true };
  try {
    // One client per kind, so neither's kept task keys weigh on the other.
    const run: Run = { server, clients: new Map(), options, progress };
    for (const kind of KINDS) run.clients.set(kind, await connect(server.url, requester.identity));

    const warmupTasks = Math.ceil((options.confidentialTasks * WARMUP_ROUNDS) / WARMUP_TURNS) * WARMUP_TURNS;
    progress(`warm-up: ${warmupTasks} text_analysis tasks and ${WARMUP_RESULTS} 1 MiB results of each kind, in turns`);
    for (let turn = 0; turn < WARMUP_TURNS; turn++) {
      for (const kind of KINDS) await runCount(textCall(run.clients.get(kind)!, kind), options.concurrency, warmupTasks / WARMUP_TURNS);
    }
    const plain = await transfer(run.clients.get("plain")!, "plain", payload, rows);
    for (let i = 0; i < WARMUP_RESULTS; i++) for (const kind of KINDS) await transfer(run.clients.get(kind)!, kind, payload, rows);

    for (let round = 0; round < options.rounds; round++) {
      const order = ordered(round);
      progress(`round ${round + 1} of ${options.rounds}: ${order.join(", ")}; ${options.confidentialTasks} tasks each, then ${RESULTS_PER_ROUND} results each`);
      for (const kind of order) cpu.push(await cpuRound(run, kind, round));
      for (const kind of order) results.push(await resultRound(run, kind, round, payload, rows, plain.opened));
    }
    return {
      config: {
        rounds: options.rounds,
        tasks_per_round: options.confidentialTasks,
        concurrency: options.concurrency,
        transport: "gRPC (SynapseClient, one per kind)",
        server: "one synapse serve child process, --store memory, own data dir",
        cpu_task: `signed text_analysis, ${TEXT.length} chars, waited to completion`,
        result_task: `data_analysis include_rows, ${rows} CSV rows (${(csv.length / 1024).toFixed(0)} KiB), waited, then ReadResult`,
        results_per_round: RESULTS_PER_ROUND,
        warmup: `${warmupTasks} tasks and ${WARMUP_RESULTS} results of each kind`,
        node: process.version,
      },
      cpu: { rounds: cpu, ...summarizeCpu(cpu) },
      result: { rows, result_bytes: plain.opened.byteLength, rounds: results, ...summarizeResults(results) },
    };
  } finally {
    await server.stop();
    await requester.remove();
  }
}

const spread = (values: readonly number[]): Spread | null => (values.length === 0 ? null : { median: median(values), min: Math.min(...values), max: Math.max(...values) });

/** confidential over plain, round by round, for the rounds that have both. */
function perRound<T extends { round: number; kind: Kind }>(rows: readonly T[], value: (row: T) => number): number[] {
  return rows.flatMap((row) => {
    if (row.kind !== "confidential") return [];
    const plain = rows.find((other) => other.kind === "plain" && other.round === row.round);
    return plain === undefined ? [] : [value(row) / value(plain)];
  });
}

export function summarizeCpu(rounds: readonly CpuRound[]): Omit<CpuPart, "rounds"> {
  return {
    summary: KINDS.map((kind) => {
      const mine = rounds.filter((row) => row.kind === kind);
      return {
        kind,
        rounds: mine.length,
        tasks_per_s: median(mine.map((row) => row.tasks_per_s)),
        p50_ms: median(mine.map((row) => row.p50_ms)),
        p99_ms: median(mine.map((row) => row.p99_ms)),
        server_cpu_ms_per_task: median(mine.map((row) => row.server_cpu_ms_per_task)),
      };
    }),
    cpu_ratio: spread(perRound(rounds, (row) => row.server_cpu_ms_per_task)),
    tasks_per_s_ratio: spread(perRound(rounds, (row) => row.tasks_per_s)),
  };
}

export function summarizeResults(rounds: readonly ResultRound[]): Omit<ResultPart, "rounds" | "rows" | "result_bytes"> {
  return {
    summary: KINDS.map((kind) => {
      const mine = rounds.filter((row) => row.kind === kind);
      return {
        kind,
        rounds: mine.length,
        stream_bytes: mine[0]?.stream_bytes ?? 0,
        mib_per_s: median(mine.map((row) => row.mib_per_s)),
        ms_per_result: median(mine.map((row) => row.ms_per_result)),
        server_cpu_ms_per_result: median(mine.map((row) => row.server_cpu_ms_per_result)),
      };
    }),
    mib_per_s_ratio: spread(perRound(rounds, (row) => row.mib_per_s)),
  };
}
