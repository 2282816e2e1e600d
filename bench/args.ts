// Command-line options of the benchmark:
//   npm run bench [-- --seconds N --concurrency N --json]            signed vs bare calls, Ed25519
//   npm run bench -- memory [--tasks 0,10000,50000,100000] [--stores memory,sqlite,postgres] [--concurrency N]
//                           [--node-flags="FLAGS"] [--serve-flags="FLAGS"] [--json]
//   npm run bench -- stores [--rounds 5] [--seconds 3] [--stores ...] [--concurrency N] [--json]
//   npm run bench -- peer [--rounds 3] [--seconds 5] [--concurrency 64] [--tasks 50000] [--watchers 10000]
//                         [--serve-flags="FLAGS"] [--json]   (or --peer)
//   npm run bench -- confidential [--rounds 5] [--tasks 400] [--concurrency 16] [--json]
import { parseArgs } from "node:util";
import { parseStores, type StoreName } from "./store-targets.js";
import { BenchUsageError } from "./usage-error.js";

/** A bad command line: reported as its message alone, with the usage. */
export { BenchUsageError };

export type BenchMode = "rpc" | "memory" | "stores" | "peer" | "confidential";

export interface BenchOptions {
  mode: BenchMode;
  /** Measured duration of each run, in seconds (rpc, stores). */
  seconds: number;
  /** Calls kept in flight at once. */
  concurrency: number;
  /** One JSON object on stdout instead of a table. */
  json: boolean;
  /** Completed-task counts at which the memory bench samples RSS, ascending, starting at 0. */
  tasks: number[];
  /** Interleaved rounds of the stores bench. */
  rounds: number;
  /** Which stores the memory or stores bench runs, in this order. */
  stores: StoreName[];
  /** Tasks each server of the peer bench has completed when its memory is read. */
  peerTasks: number;
  /** Tasks of each kind (plain, confidential) per round of the confidential bench. */
  confidentialTasks: number;
  /** Watch streams of the peer bench's fan-out. */
  watchers: number;
  /** Extra node flags for the memory bench's servers (--max-semi-space-size=8, say). */
  nodeFlags: string[];
  /** Extra `synapse serve` flags for the memory and peer benches' servers (--heap-growth 0, say). */
  serveFlags: string[];
}

export const BENCH_USAGE = `usage: npm run bench [-- [memory|stores|peer|confidential] [--seconds N] [--concurrency N] [--tasks N,N,...] [--rounds N] [--stores NAME,...] [--watchers N] [--node-flags="FLAGS"] [--serve-flags="FLAGS"] [--json]]`;

const DEFAULT_CONCURRENCY: Record<BenchMode, number> = { rpc: 16, memory: 32, stores: 32, peer: 64, confidential: 16 };
// The stores bench takes more, shorter turns: on a shared machine the load drifts within a round.
const DEFAULT_SECONDS: Record<BenchMode, number> = { rpc: 5, memory: 0, stores: 3, peer: 5, confidential: 0 };
const DEFAULT_ROUNDS: Record<BenchMode, number> = { rpc: 1, memory: 1, stores: 5, peer: 3, confidential: 5 };
const DEFAULT_STORES: Record<BenchMode, StoreName[]> = {
  rpc: [],
  memory: ["memory", "sqlite", "postgres"],
  stores: ["memory", "sqlite", "sqlite-full", "postgres", "postgres-full"],
  peer: [],
  confidential: [],
};
const MODES: readonly string[] = ["memory", "stores", "peer", "confidential"];

function positive(value: string | undefined, fallback: number, name: string, integer: boolean): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0 || (integer && !Number.isInteger(parsed))) {
    throw new BenchUsageError(`${name} must be a positive ${integer ? "integer" : "number"}, got ${JSON.stringify(value)}`);
  }
  return parsed;
}

function checkpoints(value: string | undefined): number[] {
  if (value === undefined) return [0, 10_000, 50_000, 100_000];
  const counts = value.split(",").map((part) => Number(part.trim()));
  if (counts.some((count) => !Number.isInteger(count) || count < 0)) throw new BenchUsageError(`--tasks must be non-negative integers separated by commas, got ${JSON.stringify(value)}`);
  const sorted = [...new Set([0, ...counts])].sort((a, b) => a - b);
  if (sorted.length < 2) throw new BenchUsageError("--tasks needs a checkpoint above 0");
  return sorted;
}

const words = (value: string | undefined): string[] => (value ?? "").split(/\s+/).filter((word) => word !== "");

function parse(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      options: {
        seconds: { type: "string" },
        concurrency: { type: "string" },
        json: { type: "boolean", default: false },
        tasks: { type: "string" },
        rounds: { type: "string" },
        stores: { type: "string" },
        watchers: { type: "string" },
        "node-flags": { type: "string" },
        "serve-flags": { type: "string" },
        peer: { type: "boolean", default: false },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new BenchUsageError(error instanceof Error ? error.message : String(error));
  }
}

export function parseBenchArgs(argv: readonly string[]): BenchOptions {
  const { values, positionals } = parse(argv);
  if (positionals.length > 1) throw new BenchUsageError(`one mode at most, got ${positionals.join(" ")}`);
  const named = positionals[0];
  if (named !== undefined && !MODES.includes(named)) throw new BenchUsageError(`unknown mode ${JSON.stringify(named)}: memory, stores, peer or confidential (or none)`);
  // The issue spells it `npm run bench -- --peer`.
  if (values.peer && named !== undefined && named !== "peer") throw new BenchUsageError(`--peer and ${named}: one mode at most`);
  const mode = (values.peer ? "peer" : (named ?? "rpc")) as BenchMode;
  const misplaced = [
    ["--tasks", values.tasks !== undefined && mode !== "memory" && mode !== "peer" && mode !== "confidential"],
    ["--rounds", values.rounds !== undefined && mode !== "stores" && mode !== "peer" && mode !== "confidential"],
    ["--stores", values.stores !== undefined && (mode === "rpc" || mode === "peer" || mode === "confidential")],
    ["--seconds", values.seconds !== undefined && (mode === "memory" || mode === "confidential")],
    ["--watchers", values.watchers !== undefined && mode !== "peer"],
    ["--node-flags", values["node-flags"] !== undefined && mode !== "memory"],
    ["--serve-flags", values["serve-flags"] !== undefined && mode !== "memory" && mode !== "peer"],
  ] as const;
  for (const [flag, wrong] of misplaced) if (wrong) throw new BenchUsageError(`${flag} does not apply to ${mode === "rpc" ? "the default bench" : `the ${mode} bench`}`);
  return {
    mode,
    seconds: positive(values.seconds, DEFAULT_SECONDS[mode], "--seconds", false),
    concurrency: positive(values.concurrency, DEFAULT_CONCURRENCY[mode], "--concurrency", true),
    json: values.json ?? false,
    tasks: checkpoints(mode === "peer" || mode === "confidential" ? undefined : values.tasks),
    rounds: positive(values.rounds, DEFAULT_ROUNDS[mode], "--rounds", true),
    stores: values.stores === undefined ? DEFAULT_STORES[mode] : parseStores(values.stores, "--stores"),
    peerTasks: positive(mode === "peer" ? values.tasks : undefined, 50_000, "--tasks", true),
    confidentialTasks: positive(mode === "confidential" ? values.tasks : undefined, 400, "--tasks", true),
    watchers: positive(values.watchers, 10_000, "--watchers", true),
    nodeFlags: words(values["node-flags"]),
    serveFlags: words(values["serve-flags"]),
  };
}
