// npm run fuzz -- --runs N [--seed S] [--concurrency C] [--case I ...] [--log-level L]: hostile requests of
// every kind, to every RPC, in every protocol, against a real server on
// 127.0.0.1; prints how they ended, by status, protocol and RPC. Exits 1 when
// any ended in INTERNAL, UNKNOWN, an HTTP 5xx, a reset or a hang, when the
// server stopped answering, or when its heap kept what the run brought in.
import { parseArgs } from "node:util";
import { createLogger } from "../src/log.js";
import { formatReport, runFuzz } from "./fuzz/run.js";

/** Heap the run may leave behind (MiB): tasks and remembered message ids are bounded, not zero. */
const MAX_HEAP_GROWTH_MIB = 64;

const { values } = parseArgs({
  options: { runs: { type: "string", default: "2000" }, seed: { type: "string" }, concurrency: { type: "string", default: "8" }, case: { type: "string", multiple: true }, "log-level": { type: "string" } },
});
const report = await runFuzz({
  runs: Number(values.runs),
  seed: values.seed === undefined ? undefined : Number(values.seed),
  concurrency: Number(values.concurrency),
  only: values.case?.map(Number),
  logger: values["log-level"] === undefined ? undefined : createLogger({ level: values["log-level"] }),
});
process.stdout.write(`${formatReport(report)}\n`);
const grown = report.heapAfterMiB - report.heapBeforeMiB;
process.exitCode = report.failureCount === 0 && report.aliveAfter && grown < MAX_HEAP_GROWTH_MIB ? 0 : 1;
