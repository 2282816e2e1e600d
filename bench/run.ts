// npm run bench [-- memory | stores | peer | confidential] [options]: see args.ts for the options.
//   (no mode)  signed submission vs a bare unary call over gRPC and Connect JSON, in one process, plus Ed25519 ops/s
//   memory     RSS of `synapse serve` (child process) after 0, 10k, 50k, 100k tasks on the memory, SQLite and PostgreSQL stores
//   stores     signed-submission throughput on SQLite (fsync normal and full) and PostgreSQL as ratios to the memory store
//   peer       Synapse vs the A2A JavaScript SDK (@a2a-js/sdk) with one Go load generator: ratios, CPU per task, memory, payloads, Watch fan-out
//   confidential  sealed (docs/PROTOCOL.md §9) vs plain tasks on one `synapse serve` child: server CPU per task, tasks/s, 1 MiB result MiB/s
// Progress goes to stderr; stdout holds only the table or the JSON object (--json).
import { cpus } from "node:os";
import { BENCH_USAGE, BenchUsageError, parseBenchArgs } from "./args.js";
import { confidentialBench } from "./confidential.js";
import { toConfidentialJson, toConfidentialTable } from "./confidential-report.js";
import { memoryBench } from "./memory.js";
import { GoMissingError } from "./peer/loadgen.js";
import { peerBench } from "./peer/peer.js";
import { toPeerJson, toPeerTable } from "./peer/report.js";
import { toMemoryJson, toMemoryTable } from "./memory-report.js";
import { toJson, toTable } from "./report.js";
import { rpcBench } from "./rpc.js";
import { storesBench } from "./stores.js";
import { toStoresJson, toStoresTable } from "./stores-report.js";

const progress = (message: string) => process.stderr.write(`bench: ${message}\n`);

/** The machine, for the modes whose reports do not already say. */
const machine = () => ({ cpu: cpus()[0]?.model ?? "unknown", cpus: cpus().length });

async function main(): Promise<string> {
  const options = parseBenchArgs(process.argv.slice(2));
  switch (options.mode) {
    case "rpc": {
      const report = await rpcBench(options, progress);
      return options.json ? toJson(report) : toTable(report);
    }
    case "memory": {
      const report = await memoryBench(options, progress);
      report.config = { ...report.config, ...machine() };
      return options.json ? toMemoryJson(report) : toMemoryTable(report);
    }
    case "stores": {
      const report = await storesBench(options, progress);
      report.config = { ...report.config, ...machine() };
      return options.json ? toStoresJson(report) : toStoresTable(report);
    }
    case "peer": {
      const report = await peerBench(options, progress);
      report.config = { ...report.config, ...machine() };
      return options.json ? toPeerJson(report) : toPeerTable(report);
    }
    case "confidential": {
      const report = await confidentialBench(options, progress);
      report.config = { ...report.config, ...machine() };
      return options.json ? toConfidentialJson(report) : toConfidentialTable(report);
    }
  }
}

// Ctrl-C or a kill still runs the exit hooks that stop child servers and the PostgreSQL cluster.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130));

main().then(
  // Client connections (HTTP/2 sessions, keep-alive sockets) may still hold the loop open.
  (output) => process.stdout.write(output, () => process.exit(0)),
  (error: unknown) => {
    if (error instanceof BenchUsageError) {
      process.stderr.write(`bench: ${error.message}\n${BENCH_USAGE}\n`);
      process.exit(2);
    }
    if (error instanceof GoMissingError) {
      process.stderr.write(`bench: ${error.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
