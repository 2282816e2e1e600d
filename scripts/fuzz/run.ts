// Runs fuzz cases against a real server on 127.0.0.1 (port 0) in this
// process, through raw HTTP/1.1 and HTTP/2 clients, and tallies how each call
// ended: by status, by protocol and by RPC. Also reports what the server's
// heap holds after the run compared with before it.
import { create } from "@bufbuild/protobuf";
import fc from "fast-check";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { AgentCapabilitiesSchema } from "../../gen/synapse/v1/capabilities_pb.js";
import { createAgent } from "../../src/agent/agent.js";
import { loadOrCreateIdentity } from "../../src/agent/identity.js";
import { referenceHandlers } from "../../src/agent/reference/index.js";
import { REFERENCE_TASK_TYPES } from "../../src/agent/reference/task-types.js";
import { defaultAgentCapabilities } from "../../src/capabilities/defaults.js";
import { SynapseClient } from "../../src/client/requester.js";
import { PinnedKeys } from "../../src/envelope/trust-sources.js";
import { silentLogger, type Logger } from "../../src/log.js";
import { Registry } from "../../src/registry/registry.js";
import { MESSAGE_OVERHEAD_BYTES, startServer } from "../../src/server/server.js";
import { MemoryTaskStore } from "../../src/store/memory/tasks.js";
import { MemoryGroupStorage } from "../../src/store/memory/groups.js";
import { createGroupHost } from "../../src/group/group-host.js";
import { GroupClient } from "../../src/client/group-client.js";
import { ConsensusRule } from "../../gen/synapse/v1/a2n_pb.js";
import { buildRequest } from "./build.js";
import { fuzzCase, protocolFamily, type FuzzCase } from "./cases.js";
import { fuzzTargets, type FuzzContext } from "./targets.js";
import { isFailure, outcomeLabel, WireClient, type Outcome } from "./wire.js";

export interface FuzzOptions {
  runs: number;
  /** Run only these case indices (of the `runs` the seed gives), printing each request: to look into a failure. */
  only?: number[];
  seed?: number;
  /** Calls in flight at once. */
  concurrency?: number;
  /** How long a call may take before it counts as a hang. */
  timeoutMs?: number;
  logger?: Logger;
}

export interface FuzzFailure {
  index: number;
  rpc: string;
  protocol: string;
  outcome: Outcome;
  fuzzCase: FuzzCase;
}

export interface FuzzReport {
  seed: number;
  runs: number;
  byStatus: Record<string, number>;
  /** Refusals of Synapse RPCs that came without a synapse.v1.ErrorDetail, by status. */
  untypedByStatus: Record<string, number>;
  /** The first few of those of each status, to replay with --only. */
  untyped: FuzzFailure[];
  byProtocol: Record<string, Record<string, number>>;
  byRpc: Record<string, Record<string, number>>;
  failures: FuzzFailure[];
  /** Failures beyond the ones kept in `failures`. */
  failureCount: number;
  /** Heap in use after a GC (MiB), after the first batch and after the run, the server still up. */
  heapBeforeMiB: number;
  heapAfterMiB: number;
  /** The server still answered a plain call after the run. */
  aliveAfter: boolean;
  seconds: number;
}

const MAX_FILE_SIZE = 4096;
const BATCH = 200;
const KEPT_FAILURES = 50;
const KEPT_UNTYPED_PER_STATUS = 5;

/** A full GC, when the runtime allows one (node --expose-gc, or the V8 flag set here). */
function collectGarbage(): void {
  const global = globalThis as { gc?: () => void };
  if (global.gc === undefined) {
    setFlagsFromString("--expose-gc");
    global.gc = runInNewContext("gc") as () => void;
  }
  global.gc();
}

async function heapMiB(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    collectGarbage();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return process.memoryUsage().heapUsed / (1 << 20);
}

const count = (table: Record<string, number>, key: string) => (table[key] = (table[key] ?? 0) + 1);

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  const logger = options.logger ?? silentLogger;
  const started = Date.now();
  const dir = await mkdtemp(join(tmpdir(), "synapse-fuzz-"));
  const { identity } = await loadOrCreateIdentity(join(dir, "server"), { agentId: "fuzz_executor" });
  const capabilities = defaultAgentCapabilities({ agentName: "fuzz target", supportedTaskTypes: [...REFERENCE_TASK_TYPES], maxFileSize: BigInt(MAX_FILE_SIZE) });
  const store = new MemoryTaskStore();
  const agent = createAgent({ identity, capabilities, handlers: referenceHandlers(), trust: PinnedKeys.inMemory(), store, logger, groups: true });
  const groups = createGroupHost({ agent, storage: new MemoryGroupStorage(store), logger });
  // Its id is derived from its key, so the server trusts it on first use.
  const requester = (await loadOrCreateIdentity(join(dir, "requester"))).identity;
  // Registrations are confirmed without calling out: the fuzz sends traffic to this server only.
  const selfReport = {
    capabilities: create(AgentCapabilitiesSchema, { ...agent.provider.getCapabilities(), agentId: requester.agentId, keyId: requester.key.keyId, publicKey: requester.key.publicKey }),
    interfaces: agent.provider.getSupportedInterfaces(),
  };
  const registry = new Registry({ logger, clockSkewMs: agent.clockSkewMs, confirm: async () => selfReport });
  const server = await startServer({ agent, registry, groups, port: 0, host: "127.0.0.1", logger });
  const limit = MAX_FILE_SIZE + MESSAGE_OVERHEAD_BYTES;
  const client = await SynapseClient.connect({ baseUrl: server.url, identity: requester, retryBaseDelayMs: 50 });
  const done = await client.submit("text_analysis", { text: "A finished task." }, { waitMs: 10_000 });
  const streamed = await client.submit("data_analysis", { csv: ["n", ...Array.from({ length: 400 }, (_, i) => String(i))].join("\n") }, { waitMs: 10_000 });
  // A group the requester coordinates, with a vote open: a2n messages and reads reach past the first checks.
  const coordinator = await GroupClient.connect({ baseUrl: server.url, identity: requester });
  await coordinator.create("fuzz-group");
  await coordinator.startVote("fuzz-group", { voteId: "fuzz-vote", question: "?", options: ["a", "b"], rule: ConsensusRule.RANKED, deadline: new Date(Date.now() + 3_600_000) });
  const caps = server.capabilities.getCapabilities();
  const ctx: FuzzContext = {
    serverUrl: server.url,
    serverAgentId: caps.agentId,
    serverKeyId: caps.keyId,
    requester,
    token: () => client.token(),
    doneTaskId: done.taskId,
    streamTaskId: streamed.taskId,
    taskIds: Array.from({ length: 16 }, (_, i) => `fuzz-task-${i}`),
    groupId: "fuzz-group",
  };
  const targets = fuzzTargets(true);
  const wire = new WireClient(server.url, options.timeoutMs ?? 15_000);
  const report: FuzzReport = { seed, runs: 0, byStatus: {}, untypedByStatus: {}, untyped: [], byProtocol: {}, byRpc: {}, failures: [], failureCount: 0, heapBeforeMiB: 0, heapAfterMiB: 0, aliveAfter: false, seconds: 0 };

  const runOne = async (index: number, fuzzCase: FuzzCase) => {
    const target = targets[fuzzCase.target]!;
    const request = await buildRequest(fuzzCase, target, ctx, limit);
    const outcome = await wire.send(request);
    if (options.only !== undefined) {
      const shown = { ...request, body: `${request.body.byteLength} bytes: ${Buffer.from(request.body.subarray(0, 96)).toString("hex")}` };
      process.stdout.write(`case #${index} ${target.name}\n  ${JSON.stringify(fuzzCase)}\n  request ${JSON.stringify(shown)}\n  outcome ${JSON.stringify(outcome)}\n`);
    }
    const label = outcomeLabel(outcome);
    const protocol = `${protocolFamily(fuzzCase.protocol)}${request.http2 ? " (h2)" : " (HTTP/1.1)"}`;
    report.runs++;
    count(report.byStatus, label);
    if (outcome.kind === "status" && outcome.code !== 0 && !outcome.typed && target.name.startsWith("synapse.")) {
      count(report.untypedByStatus, label);
      // A few of each status: the rare ones are the ones to look at.
      if (report.untypedByStatus[label]! <= KEPT_UNTYPED_PER_STATUS) report.untyped.push({ index, rpc: target.name, protocol, outcome, fuzzCase });
    }
    count((report.byProtocol[protocol] ??= {}), label);
    count((report.byRpc[target.name] ??= {}), label);
    if (isFailure(outcome, target.method.methodKind === "bidi_streaming" && !request.http2)) {
      report.failureCount++;
      if (report.failures.length < KEPT_FAILURES) report.failures.push({ index, rpc: target.name, protocol, outcome, fuzzCase });
    }
  };

  const arbitrary = fuzzCase(targets.length);
  const concurrency = options.concurrency ?? 8;
  try {
    for (let start = 0; start < options.runs; start += BATCH) {
      // Cases come in batches, each from its own seed, so memory stays flat however many are asked for.
      const cases = fc.sample(arbitrary, { numRuns: Math.min(BATCH, options.runs - start), seed: seed + start });
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < cases.length) {
            const i = next++;
            if (options.only === undefined || options.only.includes(start + i)) await runOne(start + i, cases[i]!);
          }
        }),
      );
      if (start === 0) report.heapBeforeMiB = await heapMiB();
    }
    const alive = await wire.send({ http2: false, method: "POST", path: "/synapse.v1.CapabilitiesService/GetCapabilities", headers: { "content-type": "application/json" }, body: Buffer.from("{}") });
    report.aliveAfter = alive.kind === "status" && alive.code === 0;
    // The server is still up: what it holds now is what the run left behind.
    report.heapAfterMiB = await heapMiB();
  } finally {
    wire.close();
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
  report.seconds = (Date.now() - started) / 1000;
  return report;
}

/** The report as text: totals by status, then by protocol and by RPC, then the first failures. */
export function formatReport(report: FuzzReport): string {
  const table = (rows: Record<string, Record<string, number>>) =>
    Object.entries(rows)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, counts]) => `  ${name.padEnd(64)} ${Object.entries(counts).sort(([, a], [, b]) => b - a).map(([k, v]) => `${k}=${v}`).join(" ")}`)
      .join("\n");
  const lines = [
    `fuzz: ${report.runs} cases, seed ${report.seed}, ${report.seconds.toFixed(1)} s`,
    `by status: ${Object.entries(report.byStatus).sort(([, a], [, b]) => b - a).map(([k, v]) => `${k}=${v}`).join(" ")}`,
    `Synapse refusals without an ErrorDetail: ${Object.entries(report.untypedByStatus).map(([k, v]) => `${k}=${v}`).join(" ") || "none"}`,
    `failures (INTERNAL, UNKNOWN, DATA_LOSS, HTTP 5xx, resets, hangs): ${report.failureCount}`,
    `server alive after the run: ${report.aliveAfter}`,
    `heap after GC: ${report.heapBeforeMiB.toFixed(1)} MiB after the first batch, ${report.heapAfterMiB.toFixed(1)} MiB after the run`,
    "by protocol:",
    table(report.byProtocol),
    "by RPC:",
    table(report.byRpc),
  ];
  for (const refusal of report.untyped) {
    lines.push(`UNTYPED #${refusal.index} ${refusal.rpc} over ${refusal.protocol}: ${JSON.stringify(refusal.outcome)}\n  case ${JSON.stringify(refusal.fuzzCase)}`);
  }
  for (const failure of report.failures.slice(0, 20)) {
    lines.push(`FAILURE #${failure.index} ${failure.rpc} over ${failure.protocol}: ${JSON.stringify(failure.outcome)}\n  case ${JSON.stringify(failure.fuzzCase)}`);
  }
  return lines.join("\n");
}
