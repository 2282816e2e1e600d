// The console's requester identity, made in the browser on first use and
// kept in sessionStorage: a reload keeps the tab's identity (and so its
// tasks), a new tab starts as a new requester. Only the seed and the agent
// id are stored; the rest is derived again (keys.ts).
import nacl from "tweetnacl";
import { fromBase64Url, toBase64Url } from "./bytes.js";
import { identityFromSeed, type ConsoleIdentity } from "./keys.js";

const STORAGE_KEY = "synapse.console.identity";

interface StoredIdentity {
  agentId: string;
  /** The 32-byte private seed, base64url. */
  seed: string;
}

function readStored(storage: Storage): StoredIdentity | undefined {
  try {
    const parsed: unknown = JSON.parse(storage.getItem(STORAGE_KEY) ?? "null");
    if (typeof parsed !== "object" || parsed === null) return undefined;
    const { agentId, seed } = parsed as Record<string, unknown>;
    return typeof agentId === "string" && typeof seed === "string" ? { agentId, seed } : undefined;
  } catch {
    return undefined; // unreadable: start afresh
  }
}

/** The tab's identity, created (and stored) on first use. */
export async function loadOrCreateIdentity(storage: Storage = sessionStorage): Promise<ConsoleIdentity> {
  const stored = readStored(storage);
  if (stored !== undefined) {
    const seed = fromBase64Url(stored.seed);
    // The id is derived from the key again: an id stored by an earlier page is not trusted on first use.
    if (seed.byteLength === nacl.sign.seedLength) return identityFromSeed(seed);
  }
  const seed = nacl.randomBytes(nacl.sign.seedLength);
  const identity = await identityFromSeed(seed);
  const record: StoredIdentity = { agentId: identity.agentId, seed: toBase64Url(seed) };
  storage.setItem(STORAGE_KEY, JSON.stringify(record));
  return identity;
}
