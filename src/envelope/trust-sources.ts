// Where trust in a sender's key comes from: a trust-store file (static,
// authoritative), keys pinned on first use (the embedded default, kept in
// the agent's store), or several of them in order.
import { readFile } from "node:fs/promises";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { fromBase64Url } from "../crypto/encoding.js";
import { isSelfCertifying, keyIdOf } from "../crypto/keys.js";
import { protocolError } from "../protocol/errors.js";
import { JsonFilePinStore } from "../store/file-pins.js";
import { MemoryPinStore } from "../store/memory/registry.js";
import type { PinnedKey, PinStore } from "../store/pins.js";
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

  /** Reads a trust-store file: `{"agents": [{"agent_id": "...", "public_key": "<base64url raw Ed25519>"}]}`. */
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

  /** Trusts `publicKey` for `agentId` (an agent may have several keys). */
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

/** What pinning answers for a key it holds or would pin: trusted, but only as the first key seen. */
const FIRST_USE: TrustVerdict = Object.freeze({ kind: "trusted", firstUse: true });

/** How many pins stay decoded in memory; the rest are read from the store when needed. */
const PIN_CACHE_LIMIT = 10_000;

/**
 * Which agent ids may be pinned on first use. "self-certifying" (an agent's
 * policy for its senders): only ids derived from the key itself, so nobody
 * can claim a name before its owner does; any other id must come from a
 * trust store or a registry. "any" (a requester's policy for the executor it
 * chose to connect to, by URL, like an SSH known_hosts file).
 */
export type FirstUse = "self-certifying" | "any";

/** Options of {@link PinnedKeys}. */
export interface PinnedKeysOptions {
  /** Which ids may be pinned on first use; default `"self-certifying"`. */
  firstUse?: FirstUse;
  /** The clock pins are dated by; default `Date.now`. */
  now?: () => number;
}

/**
 * Trust on first use: the first key an agent id is seen with (in a message
 * that passed every check) is pinned in the store, shared by every
 * instance, and required from then on. Ids pinned by earlier versions keep
 * their pins.
 */
export class PinnedKeys implements TrustPolicy {
  /** Pins never change once made, so any pin read may be kept (a bounded number of them), by agent and by key. */
  private readonly cache = new Map<string, PinnedKey>();
  private readonly byKeyId = new Map<string, PinnedKey>();

  private readonly firstUse: FirstUse;
  private readonly now: () => number;

  constructor(
    private readonly pins: PinStore,
    options: PinnedKeysOptions = {},
  ) {
    this.firstUse = options.firstUse ?? "self-certifying";
    this.now = options.now ?? Date.now;
  }

  /** Pins kept in a JSON file (created when the first key is pinned): a command-line user's known agents. */
  static async open(path: string, options: PinnedKeysOptions = {}): Promise<PinnedKeys> {
    return new PinnedKeys(await JsonFilePinStore.open(path), options);
  }

  /** Pins held in memory only. */
  static inMemory(options: PinnedKeysOptions = {}): PinnedKeys {
    return new PinnedKeys(new MemoryPinStore(), options);
  }

  private remember(pin: PinnedKey): PinnedKey {
    this.cache.delete(pin.agentId);
    this.cache.set(pin.agentId, pin);
    this.byKeyId.set(pin.keyId, pin);
    if (this.cache.size > PIN_CACHE_LIMIT) {
      const oldest = this.cache.values().next().value!;
      this.cache.delete(oldest.agentId);
      if (this.byKeyId.get(oldest.keyId) === oldest) this.byKeyId.delete(oldest.keyId);
    }
    return pin;
  }

  /** The pinned key of an agent, if any. */
  async pinned(agentId: string): Promise<PinnedKey | undefined> {
    const cached = this.cache.get(agentId);
    if (cached !== undefined) return cached;
    const pin = await this.pins.getPin(agentId);
    return pin === undefined ? undefined : this.remember(pin);
  }

  async publicKeyFor(keyId: string): Promise<Uint8Array | undefined> {
    const cached = this.byKeyId.get(keyId);
    if (cached !== undefined) return cached.publicKey;
    const pin = await this.pins.findPinByKeyId(keyId);
    return pin === undefined ? undefined : this.remember(pin).publicKey;
  }

  async check(agentId: string, keyId: string, publicKey: Uint8Array): Promise<TrustVerdict> {
    const pin = await this.pinned(agentId);
    if (pin !== undefined) return pin.keyId === keyId ? FIRST_USE : { kind: "conflict", expectedKeyId: pin.keyId };
    // First use: only a name the key itself certifies, unless any name may be pinned.
    return this.firstUse === "any" || isSelfCertifying(agentId, publicKey) ? FIRST_USE : { kind: "unknown" };
  }

  async accepted(agentId: string, keyId: string, publicKey: Uint8Array): Promise<void> {
    if (this.cache.get(agentId)?.keyId === keyId) return;
    if (this.firstUse !== "any" && !isSelfCertifying(agentId, publicKey) && (await this.pinned(agentId)) === undefined) return; // vouched for elsewhere
    await this.pin(agentId, keyId, publicKey);
  }

  async vouch(agentId: string, keyId: string, publicKey: Uint8Array): Promise<void> {
    if (this.cache.get(agentId)?.keyId !== keyId) await this.pin(agentId, keyId, publicKey);
  }

  private async pin(agentId: string, keyId: string, publicKey: Uint8Array): Promise<void> {
    const held = this.remember(await this.pins.pin({ agentId, keyId, publicKey, pinnedAtMs: this.now() }));
    // Another first use (at another instance, say) pinned a different key a moment earlier: that one holds.
    if (held.keyId !== keyId) {
      throw protocolError(ErrorCode.UNKNOWN_SENDER, `agent ${agentId} is known with a different key`, {
        details: { agent_id: agentId, key_id: keyId, expected_key_id: held.keyId },
      });
    }
  }
}

/**
 * Asks each source in order; the first that knows the agent decides. Put
 * authoritative sources (trust store, registry) before pinning, which
 * trusts any agent it has not met.
 */
export class TrustChain implements TrustPolicy {
  constructor(private readonly sources: readonly TrustPolicy[]) {}

  async publicKeyFor(keyId: string): Promise<Uint8Array | undefined> {
    for (const source of this.sources) {
      const key = await source.publicKeyFor(keyId);
      if (key !== undefined) return key;
    }
    return undefined;
  }

  async check(agentId: string, keyId: string, publicKey: Uint8Array): Promise<TrustVerdict> {
    for (const source of this.sources) {
      const verdict = await source.check(agentId, keyId, publicKey);
      if (verdict.kind !== "unknown") return verdict;
    }
    // Nobody knows the sender: a source that answered from memory looks again before it is refused.
    return this.recheck(agentId, keyId, publicKey);
  }

  async recheck(agentId: string, keyId: string, publicKey: Uint8Array): Promise<TrustVerdict> {
    for (const source of this.sources) {
      const verdict = (await source.recheck?.(agentId, keyId, publicKey)) ?? { kind: "unknown" };
      if (verdict.kind !== "unknown") return verdict;
    }
    return { kind: "unknown" };
  }

  async accepted(agentId: string, keyId: string, publicKey: Uint8Array): Promise<void> {
    for (const source of this.sources) await source.accepted?.(agentId, keyId, publicKey);
  }

  async vouch(agentId: string, keyId: string, publicKey: Uint8Array): Promise<void> {
    for (const source of this.sources) await source.vouch?.(agentId, keyId, publicKey);
  }
}
