// The fuzz suite in every test run: a few thousand hostile requests (mutated
// envelopes, bodies, framing, compression and headers) to every RPC over
// every protocol, through raw HTTP/1.1 and HTTP/2 clients against a real
// server. Each must end in a typed status (never INTERNAL or UNKNOWN, never
// a reset or a hang), the server must keep answering, and its heap must come
// back near where it was. FUZZ_SEED=S reruns a failing seed;
// `npm run fuzz -- --runs N --seed S` runs as many cases as asked.
import { describe, expect, it } from "vitest";
import { formatReport, runFuzz } from "../scripts/fuzz/run.js";
import { PROTOCOLS, protocolFamily } from "../scripts/fuzz/cases.js";
import { fuzzTargets } from "../scripts/fuzz/targets.js";

const RUNS = 4000;
/** What the run may leave on the heap: remembered message ids and a bounded set of tasks. */
const MAX_HEAP_GROWTH_MIB = 48;

describe("fuzz", () => {
  it(`answers ${RUNS} hostile requests with typed statuses and stays up`, async () => {
    const seed = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
    const report = await runFuzz({ runs: RUNS, seed });
    const summary = formatReport(report);
    expect(report.failures, summary).toEqual([]);
    expect(report.runs).toBe(RUNS);
    expect(report.aliveAfter, summary).toBe(true);
    expect(report.heapAfterMiB - report.heapBeforeMiB, summary).toBeLessThan(MAX_HEAP_GROWTH_MIB);
    // Every RPC and every protocol was reached.
    expect(Object.keys(report.byRpc).sort()).toEqual(fuzzTargets(true).map((t) => t.name).sort());
    const families = new Set(Object.keys(report.byProtocol).map((name) => name.replace(/ \(.*\)$/, "")));
    expect([...families].sort()).toEqual([...new Set(PROTOCOLS.map(protocolFamily))].sort());
  }, 180_000);
});
