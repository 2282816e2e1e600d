// Starts a real server on an ephemeral port with a fresh identity.
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadOrCreateIdentity } from "../../src/agent/identity.js";
import { REFERENCE_TASK_TYPES } from "../../src/agent/reference/task-types.js";
import { defaultAgentCapabilities } from "../../src/capabilities/defaults.js";
import { startServer, type RunningServer, type ServerOptions } from "../../src/server/server.js";

export async function tempDir(prefix = "synapse-test-"): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export interface TestServerOptions extends Partial<Omit<ServerOptions, "capabilities">> {
  maxFileSize?: number;
  agentId?: string;
}

export async function startTestServer(options: TestServerOptions = {}): Promise<RunningServer> {
  const { identity } = await loadOrCreateIdentity(await tempDir(), { agentId: options.agentId });
  const capabilities = defaultAgentCapabilities({
    agentId: identity.agentId,
    agentName: "test agent",
    systemId: "test",
    publicKey: identity.key.publicKey,
    keyId: identity.key.keyId,
    supportedTaskTypes: [...REFERENCE_TASK_TYPES],
    ...(options.maxFileSize !== undefined ? { maxFileSize: BigInt(options.maxFileSize) } : {}),
  });
  return startServer({ ...options, capabilities, port: 0, host: options.host ?? "127.0.0.1" });
}
