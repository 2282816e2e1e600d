// An agent's identity: its id and its signing key, kept in a data directory
// (agent.key, PKCS#8 PEM, mode 0600; identity.json, the id and names) and
// created on first use.
import { createHash } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { EncryptionKeyRing, loadOrCreateEncryptionKeys } from "../crypto/encryption-keys.js";
import { loadOrCreateKey, selfCertifyingAgentId, type AgentKey } from "../crypto/keys.js";

/** An agent: its id and names, and the Ed25519 key that signs everything it sends. */
export interface AgentIdentity {
  /** The agent id every message it signs carries as `sender.agent_id`. */
  agentId: string;
  /** A human-readable name, declared in its capabilities. */
  agentName: string;
  /** The system the agent belongs to (`sender.system_id`). */
  systemId: string;
  /** The signing key. */
  key: AgentKey;
  /** Its X25519 keys for confidential tasks (encryption.key beside agent.key); without them the agent makes one for this process only. */
  encryption?: EncryptionKeyRing;
}

interface IdentityFile {
  agent_id: string;
  agent_name: string;
  system_id: string;
  key_id: string;
}

export const KEY_FILE = "agent.key";
export const IDENTITY_FILE = "identity.json";
/** Keys of other agents pinned on first use, where agents kept them before the store did (imported once). */
export const PINNED_KEYS_FILE = "pinned-keys.json";

/** The default id: derived from the key (self-certifying, see selfCertifyingAgentId), so it is stable with the key. */
export function defaultAgentId(key: AgentKey): string {
  return selfCertifyingAgentId(key.publicKey);
}

/** The shorter id earlier versions derived from the key (48 bits: too short to certify anything). */
function earlierDefaultAgentId(key: AgentKey): string {
  return `agent_${createHash("sha256").update(key.publicKey).digest("hex").slice(0, 12)}`;
}

/** Values {@link loadOrCreateIdentity} uses instead of the stored (or default) ones. */
export interface IdentityOverrides {
  /** The agent id; one not derived from the key must be bound to it by the receivers' trust store or registry. */
  agentId?: string;
  /** A human-readable name. */
  agentName?: string;
  /** The name an identity gets when neither `agentName` nor its identity.json names one; default `Synapse agent`. */
  defaultAgentName?: string;
  /** The system the agent belongs to. */
  systemId?: string;
}

/** The name every identity created without one was given before names were the caller's to default: not a choice anyone made. */
const EARLIER_DEFAULT_NAME = "Synapse reference agent";

/** A key or identity file that cannot be used: the message names the file and how to recover. */
export class IdentityFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "IdentityFileError";
  }
}

const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));

async function readKey(path: string): Promise<{ key: AgentKey; created: boolean }> {
  try {
    return await loadOrCreateKey(path);
  } catch (error) {
    throw new IdentityFileError(
      `${path} is not a usable Ed25519 private key (PKCS#8 PEM): ${reason(error)}. It is this agent's identity: restore it from a backup. ` +
        `Only if it is lost for good, move it aside (mv '${path}' '${path}.damaged') and start again: the agent gets a new key, ` +
        "and agents that pinned the old one refuse the new one until they are told to trust it.",
    );
  }
}

async function readIdentityFile(path: string): Promise<Partial<IdentityFile>> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new TypeError("not a JSON object");
    return parsed as Partial<IdentityFile>;
  } catch (error) {
    throw new IdentityFileError(
      `${path} is damaged (${reason(error)}). It holds the agent's id and names: fix it, or move it aside (mv '${path}' '${path}.damaged') ` +
        "and start again with the same --agent-id, --agent-name and --system-id as before (without them the id is derived from agent.key).",
    );
  }
}

/**
 * Loads the identity kept in `dir` (`agent.key`, PKCS#8 PEM, mode 0600, and
 * `identity.json`), or creates one there on first use, with the id derived
 * from the key unless `overrides.agentId` names another. `created` says
 * whether a new key was made.
 *
 * @throws {@link IdentityFileError} when a file is damaged, saying how to recover.
 */
export async function loadOrCreateIdentity(
  dir: string,
  overrides: IdentityOverrides = {},
): Promise<{ identity: AgentIdentity; created: boolean }> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const { key, created } = await readKey(join(dir, KEY_FILE));
  const path = join(dir, IDENTITY_FILE);
  const stored = await readIdentityFile(path);
  // An identity kept with the earlier, shorter derived id moves to the self-certifying one.
  const storedId = stored.agent_id === earlierDefaultAgentId(key) ? undefined : stored.agent_id;
  const identity: AgentIdentity = {
    agentId: overrides.agentId ?? storedId ?? defaultAgentId(key),
    agentName: overrides.agentName ?? (stored.agent_name === EARLIER_DEFAULT_NAME ? undefined : stored.agent_name) ?? overrides.defaultAgentName ?? "Synapse agent",
    systemId: overrides.systemId ?? stored.system_id ?? "synapse",
    key,
    encryption: await loadOrCreateEncryptionKeys(dir),
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
