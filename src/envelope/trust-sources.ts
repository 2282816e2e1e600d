// Where trust in a sender's key comes from: a trust-store file (static,
// authoritative), keys pinned on first use (the embedded default, persisted
// in the data dir), or several of them in order.
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { fromBase64Url, toBase64Url } from "../crypto/encoding.js";
import { keyIdOf } from "../crypto/keys.js";
import type { TrustPolicy, TrustVerdict } from "./trust.js";

interface KnownKey {
  agentId: string;
  keyId: string;
  publicKey: Uint8Array;
}

/** Keys listed in a file: {"agents": [{"agent_id": "...", "public_key": "<base64url raw Ed25519>"}]}. */
export class TrustStore implements TrustPolicy {
  private readonly byAgent = new Map<string, KnownKey[]>();
  private readonly byKeyId = new Map<string, KnownKey>();

  constructor(entries: Array<{ agentId: string; publicKey: Uint8Array }>) {
    for (const entry of entries) this.add(entry.agentId, entry.publicKey);
  }

  static async load(path: string): Promise<TrustStore> {
    const parsed = JSON.parse(await readFile(path, "utf8")) as { agents?: Array<{ agent_id?: unknown; public_key?: unknown }> };
    if (!Array.isArray(parsed.agents)) throw new TypeError(`${path}: expected {"agents": [...]}`);
    return new TrustStore(
      parsed.agents.map((entry, index) => {
        if (typeof entry.agent_id !== "string" || typeof entry.public_key !== "string") {
          throw new TypeError(`${path}: agents[${index}] needs string agent_id and public_key`);
        }
        return { agentId: entry.agent_id, publicKey: fromBase64Url(entry.public_key) };
      }),
    );
  }

  add(agentId: string, publicKey: Uint8Array): void {
    const known = { agentId, keyId: keyIdOf(publicKey), publicKey };
    this.byAgent.set(agentId, [...(this.byAgent.get(agentId) ?? []), known]);
    this.byKeyId.set(known.keyId, known);
  }

  publicKeyFor(keyId: string): Uint8Array | undefined {
    return this.byKeyId.get(keyId)?.publicKey;
  }

  check(agentId: string, keyId: string): TrustVerdict {
    const keys = this.byAgent.get(agentId);
    if (keys === undefined) return { kind: "unknown" };
    return keys.some((key) => key.keyId === keyId) ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: keys[0]!.keyId };
  }
}

interface PinFile {
  agents: Record<string, { key_id: string; public_key: string; pinned_at: string }>;
}

/**
 * Trust on first use: the first key an agent id is seen with (in a message
 * that passed every check) is pinned, persisted, and required from then on.
 */
export class PinnedKeys implements TrustPolicy {
  private readonly pins = new Map<string, KnownKey>();
  private readonly byKeyId = new Map<string, KnownKey>();
  private writing: Promise<void> = Promise.resolve();

  private constructor(private readonly path: string | undefined) {}

  /** Pins kept in a JSON file (created when the first key is pinned). */
  static async open(path: string): Promise<PinnedKeys> {
    const pins = new PinnedKeys(path);
    try {
      const parsed = JSON.parse(await readFile(path, "utf8")) as PinFile;
      for (const [agentId, entry] of Object.entries(parsed.agents ?? {})) pins.remember(agentId, fromBase64Url(entry.public_key));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    return pins;
  }

  /** Pins held in memory only. */
  static inMemory(): PinnedKeys {
    return new PinnedKeys(undefined);
  }

  private remember(agentId: string, publicKey: Uint8Array): KnownKey {
    const known = { agentId, keyId: keyIdOf(publicKey), publicKey };
    this.pins.set(agentId, known);
    this.byKeyId.set(known.keyId, known);
    return known;
  }

  publicKeyFor(keyId: string): Uint8Array | undefined {
    return this.byKeyId.get(keyId)?.publicKey;
  }

  check(agentId: string, keyId: string): TrustVerdict {
    const pinned = this.pins.get(agentId);
    if (pinned === undefined) return { kind: "trusted" }; // first use
    return pinned.keyId === keyId ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: pinned.keyId };
  }

  /** The pinned key of an agent, if any. */
  pinned(agentId: string): { keyId: string; publicKey: Uint8Array } | undefined {
    return this.pins.get(agentId);
  }

  async accepted(agentId: string, _keyId: string, publicKey: Uint8Array): Promise<void> {
    if (this.pins.has(agentId)) return;
    this.remember(agentId, publicKey);
    await this.save();
  }

  private save(): Promise<void> {
    const path = this.path;
    if (path === undefined) return Promise.resolve();
    // Writes are serialized and atomic (temp file, then rename).
    this.writing = this.writing.then(async () => {
      const file: PinFile = { agents: {} };
      for (const [agentId, known] of this.pins) {
        file.agents[agentId] = { key_id: known.keyId, public_key: toBase64Url(known.publicKey), pinned_at: new Date().toISOString() };
      }
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      const temp = `${path}.${process.pid}.tmp`;
      await writeFile(temp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
      await rename(temp, path);
    });
    return this.writing;
  }
}

/**
 * Asks each source in order; the first that knows the agent decides. Put
 * authoritative sources (trust store, registry) before pinning, which
 * trusts any agent it has not met.
 */
export class TrustChain implements TrustPolicy {
  constructor(private readonly sources: readonly TrustPolicy[]) {}

  publicKeyFor(keyId: string): Uint8Array | undefined {
    for (const source of this.sources) {
      const key = source.publicKeyFor(keyId);
      if (key !== undefined) return key;
    }
    return undefined;
  }

  async check(agentId: string, keyId: string, publicKey: Uint8Array): Promise<TrustVerdict> {
    for (const source of this.sources) {
      const verdict = await source.check(agentId, keyId, publicKey);
      if (verdict.kind !== "unknown") return verdict;
    }
    return { kind: "unknown" };
  }

  async accepted(agentId: string, keyId: string, publicKey: Uint8Array): Promise<void> {
    for (const source of this.sources) await source.accepted?.(agentId, keyId, publicKey);
  }
}
