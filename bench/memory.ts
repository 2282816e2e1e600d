// npm run bench -- memory: the RSS of `synapse serve` (a child process, one
// per store, fresh data dir and database) after 0, 10k, 50k and 100k
// completed signed text_analysis tasks from a closed-loop load generator in
// this process. Nothing is forced in the server (no GC calls, default
// --retention of 7 days, so nothing is pruned during the run): the RSS is
// what an operator would see.
import type { BenchOptions } from "./args.js";
import type { ChildServer, ProcessSample } from "./child-server.js";
import { runCount, type Call } from "./measure.js";
import type { MemoryReport, MemoryRow } from "./memory-report.js";
import { isPostgres, openBenchPostgres, startStoreServer, STORE_NOTES, type BenchPostgres, type StoreName } from "./store-targets.js";
import { signedCall, temporaryRequester, TEXT } from "./workloads.js";

/** Load between progress lines; RSS is sampled only at the checkpoints. */
const PROGRESS_EVERY = 10_000;

type Progress = (message: string) => void;

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

async function measureStore(
  store: StoreName,
  postgres: BenchPostgres | undefined,
  identity: Parameters<typeof signedCall>[2],
  options: BenchOptions,
  progress: Progress,
): Promise<MemoryRow> {
  const row: MemoryRow = { store, pid: 0, checkpoints: [], tasks_per_second: 0, failed: null };
  let server: ChildServer | undefined;
  let completed = 0;
  let loadSeconds = 0;
  try {
    server = await startStoreServer(store, postgres, progress, { traceGc: true, nodeFlags: options.nodeFlags, serveFlags: options.serveFlags });
    row.pid = server.pid;
    const submit = await signedCall(server.url, "grpc", identity);
    const counted: Call = async () => {
      await submit();
      completed++;
    };
    const running = server;
    const record = (sample: ProcessSample) => {
      const heap = running.heap();
      row.checkpoints.push({
        tasks: completed,
        rss_bytes: sample.rssBytes,
        peak_rss_bytes: sample.peakRssBytes,
        heap_after_full_gc_bytes: heap?.afterFullGcBytes ?? null,
        full_gcs: heap?.fullGcs ?? 0,
        cpu_ms: sample.cpuMs,
      });
      const heapNote = heap === null ? "no full GC yet" : `heap ${mib(heap.afterFullGcBytes)} MiB after full GC #${heap.fullGcs}`;
      progress(`${store}: ${completed} tasks done, RSS ${mib(sample.rssBytes)} MiB (peak ${mib(sample.peakRssBytes)} MiB), ${heapNote}`);
    };
    record(running.sample());
    for (const target of options.tasks.slice(1)) {
      while (completed < target) {
        const chunk = Math.min(PROGRESS_EVERY - (completed % PROGRESS_EVERY), target - completed);
        const result = await runCount(counted, options.concurrency, chunk);
        loadSeconds += result.seconds;
        if (completed < target) progress(`${store}: ${completed} tasks (${result.rps.toFixed(0)}/s, p50 ${result.p50Ms.toFixed(1)} ms)`);
      }
      record(running.sample());
    }
  } catch (error) {
    const died = server?.exited();
    row.failed = died ? `server ${died} after ${completed} tasks` : `${error instanceof Error ? error.message : String(error)} (after ${completed} tasks)`;
    progress(`${store}: FAILED: ${row.failed}`);
  } finally {
    await server?.stop();
  }
  row.tasks_per_second = loadSeconds > 0 ? completed / loadSeconds : 0;
  return row;
}

export async function memoryBench(options: BenchOptions, progress: Progress): Promise<MemoryReport> {
  const requester = await temporaryRequester();
  const wantsPostgres = options.stores.some(isPostgres);
  const opened = wantsPostgres ? await openBenchPostgres(progress) : undefined;
  const postgres = opened !== undefined && "serveArgs" in opened ? opened : undefined;
  const skipped = opened !== undefined && "skipped" in opened ? opened.skipped : null;
  const stores = postgres === undefined ? options.stores.filter((store) => !isPostgres(store)) : options.stores;
  const rows: MemoryRow[] = [];
  try {
    for (const store of stores) {
      progress(`${store}: ${options.tasks.at(-1)} tasks at concurrency ${options.concurrency}, RSS at ${options.tasks.join(", ")}`);
      rows.push(await measureStore(store, postgres, requester.identity, options, progress));
    }
  } finally {
    await postgres?.stop();
    await requester.remove();
  }
  return {
    config: {
      checkpoints: options.tasks.join(","),
      concurrency: options.concurrency,
      protocol: "grpc",
      task: `text_analysis, ${TEXT.length} chars, each waited to completion`,
      server: `synapse serve child process, node --trace-gc${options.nodeFlags.map((flag) => ` ${flag}`).join("")}, --log-level warn, --max-concurrent-tasks 10000 --idle-timeout 0${options.serveFlags.map((flag) => ` ${flag}`).join("")}, default --retention 7d`,
      ...(postgres ? { postgres: postgres.where } : {}),
      node: process.version,
    },
    notes: stores.map((store) => `${store}: ${STORE_NOTES[store]}`),
    skipped,
    rows,
  };
}
