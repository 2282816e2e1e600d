// A registry as a trust source: the key a registry holds for an agent id
// is trusted for it. Lookups are cached briefly; an agent the registry does
// not know is "unknown", so the next source (pinning, say) decides. When no
// source knows the sender and its message would be refused, a cached "not
// registered" is asked again (the owner may have registered since), at a
// bounded rate, so that a flood of unknown senders cannot hammer the registry.
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { RegistryService } from "../../gen/synapse/v1/registry_pb.js";
import { createTransport } from "../client/transport.js";
import type { TrustPolicy, TrustVerdict } from "../envelope/trust.js";
import type { DirectoryStorage } from "../store/registry-storage.js";

/**
 * The directory of a registry this server hosts: the key an agent registered
 * with is trusted for its id. Anyone may register a freshly made key there
 * (ids the operator binds are answered by the trust store first), so the
 * answer counts as first use: the limits of strangers apply.
 */
export class DirectoryTrust implements TrustPolicy {
  constructor(private readonly directory: DirectoryStorage) {}

  async publicKeyFor(keyId: string): Promise<Uint8Array | undefined> {
    return (await this.directory.findAgentByKeyId(keyId))?.publicKey;
  }

  async check(agentId: string, keyId: string): Promise<TrustVerdict> {
    const entry = await this.directory.getAgent(agentId);
    if (entry === undefined) return { kind: "unknown" };
    return entry.keyId === keyId ? { kind: "trusted", firstUse: true } : { kind: "conflict", expectedKeyId: entry.keyId };
  }
}

interface Known {
  /** The key the registry holds for the id; undefined: not registered there. */
  keyId: string | undefined;
  publicKey?: Uint8Array;
  /** When the registry answered. */
  at: number;
  until: number;
}

/** An answer younger than this is the registry's current word: asking again would only repeat it. */
const JUST_ASKED_MS = 100;

/**
 * A remote registry's directory, asked over RPC. What it answered is kept for
 * `ttlMs`, for at most `maxEntries` agent ids (expired answers go first, then
 * the oldest): senders with made-up ids must not grow the cache without bound.
 * Concurrent lookups of one id share one call to the registry. A kept "not
 * registered" decides nothing on its own: {@link recheck} asks again, at most
 * `recheckPerSecond` times a second across all ids.
 */
export class RegistryTrust implements TrustPolicy {
  private readonly client: Client<typeof RegistryService>;
  private readonly known = new Map<string, Known>();
  private readonly byKeyId = new Map<string, { agentId: string; publicKey: Uint8Array }>();
  private readonly asking = new Map<string, Promise<string | undefined>>();
  /** Rechecks allowed now (a token bucket refilled at recheckPerSecond, holding at most that many). */
  private recheckTokens: number;
  private recheckRefilledAt = Date.now();

  constructor(
    registryUrl: string,
    private readonly ttlMs = 10_000,
    private readonly maxEntries = 10_000,
    private readonly recheckPerSecond = 20,
  ) {
    this.client = createClient(RegistryService, createTransport(registryUrl));
    this.recheckTokens = recheckPerSecond;
  }

  /** Agent ids whose answer is held now. */
  get size(): number {
    return this.known.size;
  }

  publicKeyFor(keyId: string): Uint8Array | undefined {
    const entry = this.byKeyId.get(keyId);
    return entry !== undefined && this.fresh(this.known.get(entry.agentId)) ? entry.publicKey : undefined;
  }

  async check(agentId: string, keyId: string): Promise<TrustVerdict> {
    const known = await this.lookup(agentId);
    if (known === undefined) return { kind: "unknown" };
    return known === keyId ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: known };
  }

  /**
   * Asked when no trust source knows the sender: a "not registered" held from
   * an earlier lookup is asked again, since the agent may have registered
   * since (one call per id at a time, and at most recheckPerSecond a second).
   */
  async recheck(agentId: string, keyId: string): Promise<TrustVerdict> {
    const cached = this.known.get(agentId);
    if (!this.fresh(cached) || cached.keyId !== undefined || Date.now() - cached.at < JUST_ASKED_MS) return { kind: "unknown" };
    if (!this.asking.has(agentId)) {
      if (!this.takeRecheckToken()) return { kind: "unknown" };
      this.forget(agentId);
    }
    return this.check(agentId, keyId);
  }

  private takeRecheckToken(): boolean {
    const now = Date.now();
    this.recheckTokens = Math.min(this.recheckPerSecond, this.recheckTokens + ((now - this.recheckRefilledAt) / 1000) * this.recheckPerSecond);
    this.recheckRefilledAt = now;
    if (this.recheckTokens < 1) return false;
    this.recheckTokens -= 1;
    return true;
  }

  private fresh(entry: Known | undefined): entry is Known {
    return entry !== undefined && entry.until > Date.now();
  }

  private lookup(agentId: string): Promise<string | undefined> {
    const cached = this.known.get(agentId);
    if (this.fresh(cached)) return Promise.resolve(cached.keyId);
    let asking = this.asking.get(agentId);
    if (asking === undefined) {
      asking = this.ask(agentId).finally(() => this.asking.delete(agentId));
      this.asking.set(agentId, asking);
    }
    return asking;
  }

  private async ask(agentId: string): Promise<string | undefined> {
    try {
      const { agent } = await this.client.getAgent({ agentId }, { timeoutMs: 3000 });
      const caps = agent?.capabilities;
      this.remember(agentId, { keyId: caps?.keyId, publicKey: caps?.publicKey, at: Date.now(), until: Date.now() + this.ttlMs });
      return caps?.keyId;
    } catch (error) {
      // Not registered: the registry has no opinion. Unreachable: neither.
      if (ConnectError.from(error).code === Code.NotFound) this.remember(agentId, { keyId: undefined, at: Date.now(), until: Date.now() + this.ttlMs });
      return undefined;
    }
  }

  private remember(agentId: string, entry: Known): void {
    this.forget(agentId);
    // A Map iterates in insertion order, which is expiry order (one TTL for all):
    // expired answers go from the front, then the oldest while the cache is full.
    const now = Date.now();
    for (const [id, held] of this.known) {
      if (held.until > now && this.known.size < this.maxEntries) break;
      this.forget(id);
    }
    if (this.maxEntries <= 0) return;
    this.known.set(agentId, entry);
    if (entry.keyId !== undefined && entry.publicKey !== undefined) this.byKeyId.set(entry.keyId, { agentId, publicKey: entry.publicKey });
  }

  private forget(agentId: string): void {
    const held = this.known.get(agentId);
    if (held === undefined) return;
    this.known.delete(agentId);
    if (held.keyId !== undefined && this.byKeyId.get(held.keyId)?.agentId === agentId) this.byKeyId.delete(held.keyId);
  }
}
