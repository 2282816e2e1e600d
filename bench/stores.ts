// npm run bench -- stores: signed-submission throughput (and p50/p99) of
// `synapse serve` on each store, as a ratio to the memory store measured in
// the same run. Every store's server is its own child process (fresh data
// dir, fresh database), started once; the load generator (this process)
// drives one server at a time, in interleaved rounds with the order rotated
// each round, and the medians over the rounds are reported.
import type { BenchOptions } from "./args.js";
import type { ChildServer } from "./child-server.js";
import { runLoad, type Call } from "./measure.js";
import { isPostgres, openBenchPostgres, startStoreServer, STORE_NOTES, type StoreName } from "./store-targets.js";
import type { StoreRound, StoresReport, StoreSummary } from "./stores-report.js";
import { BENCH_PROTOCOLS, signedCall, temporaryRequester, TEXT, type BenchProtocol } from "./workloads.js";

const FIRST_WARMUP_SECONDS = 2;
const WARMUP_SECONDS = 1;

type Progress = (message: string) => void;

interface Target {
  store: StoreName;
  server: ChildServer;
  calls: Map<BenchProtocol, Call>;
}

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? Number.NaN) + (sorted[mid] ?? Number.NaN)) / 2;
};

/** The round's order: the store list rotated by the round number, so no store always runs first or last. */
const rotated = <T>(items: readonly T[], by: number): T[] => items.map((_, i) => items[(i + by) % items.length] as T);

async function measure(target: Target, protocol: BenchProtocol, round: number, options: BenchOptions, progress: Progress): Promise<StoreRound> {
  const call = target.calls.get(protocol);
  if (call === undefined) throw new Error(`no ${protocol} client for ${target.store}`);
  await runLoad(call, options.concurrency, WARMUP_SECONDS * 1000);
  const before = target.server.sample();
  const result = await runLoad(call, options.concurrency, options.seconds * 1000);
  const after = target.server.sample();
  progress(`round ${round + 1}: ${target.store} over ${protocol}: ${result.rps.toFixed(0)}/s, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms`);
  return {
    round: round + 1,
    store: target.store,
    protocol,
    requests: result.requests,
    rps: result.rps,
    p50_ms: result.p50Ms,
    p99_ms: result.p99Ms,
    server_cpu_ms_per_task: (after.cpuMs - before.cpuMs) / result.requests,
    ratio_to_memory: null,
    cpu_vs_memory: null,
  };
}

function summarize(rounds: StoreRound[], stores: readonly StoreName[]): StoreSummary[] {
  // Each round's rate is set against the memory store's in the same round and protocol, then the median is taken.
  for (const row of rounds) {
    const memory = rounds.find((other) => other.store === "memory" && other.round === row.round && other.protocol === row.protocol);
    row.ratio_to_memory = memory === undefined ? null : row.rps / memory.rps;
    row.cpu_vs_memory = memory === undefined ? null : row.server_cpu_ms_per_task / memory.server_cpu_ms_per_task;
  }
  const summaries: StoreSummary[] = [];
  for (const protocol of BENCH_PROTOCOLS) {
    for (const store of stores) {
      const mine = rounds.filter((row) => row.store === store && row.protocol === protocol);
      if (mine.length === 0) continue;
      const ratios = mine.flatMap((row) => (row.ratio_to_memory === null ? [] : [row.ratio_to_memory]));
      const cpu = mine.flatMap((row) => (row.cpu_vs_memory === null ? [] : [row.cpu_vs_memory]));
      summaries.push({
        store,
        protocol,
        rounds: mine.length,
        rps: median(mine.map((row) => row.rps)),
        p50_ms: median(mine.map((row) => row.p50_ms)),
        p99_ms: median(mine.map((row) => row.p99_ms)),
        server_cpu_ms_per_task: median(mine.map((row) => row.server_cpu_ms_per_task)),
        ratio_to_memory: ratios.length === 0 ? null : median(ratios),
        ratio_min: ratios.length === 0 ? null : Math.min(...ratios),
        ratio_max: ratios.length === 0 ? null : Math.max(...ratios),
        cpu_vs_memory: cpu.length === 0 ? null : median(cpu),
      });
    }
  }
  return summaries;
}

export async function storesBench(options: BenchOptions, progress: Progress): Promise<StoresReport> {
  // Ratios need the memory store in every round.
  const wanted: StoreName[] = options.stores.includes("memory") ? options.stores : ["memory", ...options.stores];
  const requester = await temporaryRequester();
  const opened = wanted.some(isPostgres) ? await openBenchPostgres(progress) : undefined;
  const postgres = opened !== undefined && "serveArgs" in opened ? opened : undefined;
  const skipped = opened !== undefined && "skipped" in opened ? opened.skipped : null;
  const stores = postgres === undefined ? wanted.filter((store) => !isPostgres(store)) : wanted;
  const targets: Target[] = [];
  const rounds: StoreRound[] = [];
  try {
    for (const store of stores) {
      const server = await startStoreServer(store, postgres, progress);
      const target: Target = { store, server, calls: new Map() };
      targets.push(target);
      for (const protocol of BENCH_PROTOCOLS) target.calls.set(protocol, await signedCall(server.url, protocol, requester.identity));
    }
    for (const target of targets) {
      progress(`${target.store}: first warm-up, ${FIRST_WARMUP_SECONDS} s per protocol`);
      for (const call of target.calls.values()) await runLoad(call, options.concurrency, FIRST_WARMUP_SECONDS * 1000);
    }
    for (let round = 0; round < options.rounds; round++) {
      const order = rotated(targets, round);
      progress(`round ${round + 1} of ${options.rounds}: ${order.map((t) => t.store).join(", ")}; ${WARMUP_SECONDS} s warm-up + ${options.seconds} s each`);
      for (const target of order) for (const protocol of BENCH_PROTOCOLS) rounds.push(await measure(target, protocol, round, options, progress));
    }
  } finally {
    for (const target of targets) await target.server.stop();
    await postgres?.stop();
    await requester.remove();
  }
  return {
    config: {
      rounds: options.rounds,
      seconds: options.seconds,
      warmup_seconds: WARMUP_SECONDS,
      concurrency: options.concurrency,
      task: `signed text_analysis submit, ${TEXT.length} chars, waited to completion`,
      servers: "one synapse serve child process per store (fresh data dir / database; --max-concurrent-tasks 10000 --idle-timeout 0), load generator in this process",
      ...(postgres ? { postgres: postgres.where } : {}),
      node: process.version,
    },
    notes: stores.map((store) => `${store}: ${STORE_NOTES[store]}`),
    skipped,
    summary: summarize(rounds, stores),
    rounds,
  };
}
