// A registry as a trust source: the key a registry holds for an agent id
// is trusted for it. Lookups are cached briefly; an agent the registry does
// not know is "unknown", so the next source (pinning, say) decides.
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { RegistryService } from "../../gen/synapse/v1/registry_pb.js";
import { createTransport } from "../client/transport.js";
import type { TrustPolicy, TrustVerdict } from "../envelope/trust.js";
import type { DirectoryStorage } from "../store/registry-storage.js";

/** The directory of a registry this server hosts: the key an agent registered with is trusted for its id. */
export class DirectoryTrust implements TrustPolicy {
  constructor(private readonly directory: DirectoryStorage) {}

  async publicKeyFor(keyId: string): Promise<Uint8Array | undefined> {
    return (await this.directory.findAgentByKeyId(keyId))?.publicKey;
  }

  async check(agentId: string, keyId: string): Promise<TrustVerdict> {
    const entry = await this.directory.getAgent(agentId);
    if (entry === undefined) return { kind: "unknown" };
    return entry.keyId === keyId ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: entry.keyId };
  }
}

export class RegistryTrust implements TrustPolicy {
  private readonly client: Client<typeof RegistryService>;
  private readonly cache = new Map<string, { keyId: string | undefined; publicKey?: Uint8Array; until: number }>();

  constructor(
    registryUrl: string,
    private readonly ttlMs = 10_000,
  ) {
    this.client = createClient(RegistryService, createTransport(registryUrl));
  }

  publicKeyFor(keyId: string): Uint8Array | undefined {
    for (const entry of this.cache.values()) if (entry.keyId === keyId && entry.until > Date.now()) return entry.publicKey;
    return undefined;
  }

  async check(agentId: string, keyId: string): Promise<TrustVerdict> {
    const known = await this.lookup(agentId);
    if (known === undefined) return { kind: "unknown" };
    return known === keyId ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: known };
  }

  private async lookup(agentId: string): Promise<string | undefined> {
    const cached = this.cache.get(agentId);
    if (cached && cached.until > Date.now()) return cached.keyId;
    try {
      const { agent } = await this.client.getAgent({ agentId }, { timeoutMs: 3000 });
      const caps = agent?.capabilities;
      this.cache.set(agentId, { keyId: caps?.keyId, publicKey: caps?.publicKey, until: Date.now() + this.ttlMs });
      return caps?.keyId;
    } catch (error) {
      // Not registered: the registry has no opinion. Unreachable: neither.
      if (ConnectError.from(error).code === Code.NotFound) this.cache.set(agentId, { keyId: undefined, until: Date.now() + this.ttlMs });
      return undefined;
    }
  }
}
