// The agent server under test: the reference agent on an ephemeral port,
// with a fresh identity in a temporary directory, so a run leaves no state behind.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent } from "../src/agent/agent.js";
import { loadOrCreateIdentity, type AgentIdentity } from "../src/agent/identity.js";
import { referenceHandlers } from "../src/agent/reference/index.js";
import { REFERENCE_TASK_TYPES } from "../src/agent/reference/task-types.js";
import { defaultAgentCapabilities } from "../src/capabilities/defaults.js";
import { PinnedKeys } from "../src/envelope/trust-sources.js";
import { silentLogger } from "../src/log.js";
import { startServer, type RunningServer } from "../src/server/server.js";

export interface BenchServer {
  server: RunningServer;
  /** A requester identity, made in the same temporary directory. */
  requester: AgentIdentity;
  /** Closes the server and removes the temporary directory. */
  close(): Promise<void>;
}

export async function startBenchServer(): Promise<BenchServer> {
  const dir = await mkdtemp(join(tmpdir(), "synapse-bench-"));
  const { identity } = await loadOrCreateIdentity(join(dir, "agent"));
  const requester = (await loadOrCreateIdentity(join(dir, "requester"))).identity;
  const agent = createAgent({
    identity,
    capabilities: defaultAgentCapabilities({
      agentName: "bench agent",
      supportedTaskTypes: [...REFERENCE_TASK_TYPES],
      // High enough that the bench measures throughput, not the admission limit.
      maxConcurrentTasks: 10_000,
    }),
    handlers: referenceHandlers(),
    trust: PinnedKeys.inMemory(),
    logger: silentLogger,
  });
  const server = await startServer({ agent, host: "127.0.0.1", port: 0, logger: silentLogger });
  return {
    server,
    requester,
    async close() {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
