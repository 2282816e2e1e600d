// An agent's identity: its id and its signing key, kept in a data directory
// (agent.key, PKCS#8 PEM, mode 0600; identity.json, the id and names) and
// created on first use.
import { createHash } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { loadOrCreateKey, type AgentKey } from "../crypto/keys.js";

export interface AgentIdentity {
  agentId: string;
  agentName: string;
  systemId: string;
  key: AgentKey;
}

interface IdentityFile {
  agent_id: string;
  agent_name: string;
  system_id: string;
  key_id: string;
}

export const KEY_FILE = "agent.key";
export const IDENTITY_FILE = "identity.json";
/** Keys of other agents, pinned on first use. */
export const PINNED_KEYS_FILE = "pinned-keys.json";

/** A readable default id derived from the key, so it is stable with the key. */
export function defaultAgentId(key: AgentKey): string {
  return `agent_${createHash("sha256").update(key.publicKey).digest("hex").slice(0, 12)}`;
}

export interface IdentityOverrides {
  agentId?: string;
  agentName?: string;
  systemId?: string;
}

export async function loadOrCreateIdentity(
  dir: string,
  overrides: IdentityOverrides = {},
): Promise<{ identity: AgentIdentity; created: boolean }> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const { key, created } = await loadOrCreateKey(join(dir, KEY_FILE));
  const path = join(dir, IDENTITY_FILE);
  let stored: Partial<IdentityFile> = {};
  try {
    stored = JSON.parse(await readFile(path, "utf8")) as Partial<IdentityFile>;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const identity: AgentIdentity = {
    agentId: overrides.agentId ?? stored.agent_id ?? defaultAgentId(key),
    agentName: overrides.agentName ?? stored.agent_name ?? "Synapse reference agent",
    systemId: overrides.systemId ?? stored.system_id ?? "synapse",
    key,
  };
  const next: IdentityFile = {
    agent_id: identity.agentId,
    agent_name: identity.agentName,
    system_id: identity.systemId,
    key_id: key.keyId,
  };
  if (JSON.stringify(next) !== JSON.stringify(stored)) {
    await writeFile(path, `${JSON.stringify(next, null, 2)}\n`, { mode: 0o600 });
  }
  return { identity, created };
}
