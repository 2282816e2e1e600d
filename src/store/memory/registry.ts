// The in-memory directory, catalogue and pin stores (tests and embedding).
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { AuditEvent, GovernedCapability, PermissionGrant } from "../../../gen/synapse/v1/registry_pb.js";
import type { PinnedKey, PinStore } from "../pins.js";
import type {
  CatalogueState,
  CatalogueStorage,
  CatalogueWrites,
  DirectoryEntry,
  DirectoryStorage,
  NewDirectoryEntry,
  SequencedAuditEvent,
} from "../registry-storage.js";

export class MemoryPinStore implements PinStore {
  private readonly byAgent = new Map<string, PinnedKey>();
  private readonly byKeyId = new Map<string, PinnedKey>();

  async getPin(agentId: string): Promise<PinnedKey | undefined> {
    return this.byAgent.get(agentId);
  }

  async findPinByKeyId(keyId: string): Promise<PinnedKey | undefined> {
    return this.byKeyId.get(keyId);
  }

  async pin(entry: PinnedKey): Promise<PinnedKey> {
    const held = this.byAgent.get(entry.agentId);
    if (held !== undefined) return held;
    this.byAgent.set(entry.agentId, entry);
    if (!this.byKeyId.has(entry.keyId)) this.byKeyId.set(entry.keyId, entry);
    return entry;
  }
}

export class MemoryDirectoryStorage implements DirectoryStorage {
  private readonly entries = new Map<string, DirectoryEntry>();

  async getAgent(agentId: string): Promise<DirectoryEntry | undefined> {
    return this.entries.get(agentId);
  }

  async findAgentByKeyId(keyId: string): Promise<DirectoryEntry | undefined> {
    for (const entry of this.entries.values()) if (entry.keyId === keyId) return entry;
    return undefined;
  }

  async listAgents(): Promise<DirectoryEntry[]> {
    return [...this.entries.values()];
  }

  async countAgents(): Promise<number> {
    return this.entries.size;
  }

  async putAgent(entry: NewDirectoryEntry) {
    const held = this.entries.get(entry.agentId);
    if (held !== undefined && held.keyId !== entry.keyId) return { held };
    const stored: DirectoryEntry = { ...entry, version: (held?.version ?? 0) + 1 };
    this.entries.set(entry.agentId, stored);
    return { entry: stored };
  }

  async updateAgent(entry: NewDirectoryEntry, expectedVersion: number): Promise<DirectoryEntry | undefined> {
    const held = this.entries.get(entry.agentId);
    if (held === undefined || held.version !== expectedVersion || held.keyId !== entry.keyId) return undefined;
    const stored: DirectoryEntry = { ...entry, version: held.version + 1 };
    this.entries.set(entry.agentId, stored);
    return stored;
  }

  async deleteAgent(agentId: string, expectedVersion?: number): Promise<boolean> {
    const held = this.entries.get(agentId);
    if (held === undefined || (expectedVersion !== undefined && held.version !== expectedVersion)) return false;
    return this.entries.delete(agentId);
  }
}

export class MemoryCatalogueStorage implements CatalogueStorage, CatalogueState {
  private readonly records = new Map<string, GovernedCapability>();
  /** The audit trail from sequence `firstSequence` on (older events were pruned). */
  private readonly trail: AuditEvent[] = [];
  private firstSequence = 1;
  private readonly granted = new Map<string, PermissionGrant>();
  private queue: Promise<unknown> = Promise.resolve();

  getCapability(id: string): GovernedCapability | undefined {
    return this.records.get(id);
  }

  capabilities(): Iterable<GovernedCapability> {
    return this.records.values();
  }

  lastAuditSequence(): number {
    return this.firstSequence + this.trail.length - 1;
  }

  getGrant(keyId: string): PermissionGrant | undefined {
    return this.granted.get(keyId);
  }

  grants(): Iterable<PermissionGrant> {
    return this.granted.values();
  }

  update<T>(work: (state: CatalogueState) => CatalogueWrites<T>): Promise<T> {
    // One operation at a time, like the durable stores' transactions.
    const run = this.queue.then(() => {
      const writes = work(this);
      for (const capability of writes.capabilities) this.records.set(capability.id, capability);
      for (const id of writes.removed ?? []) this.records.delete(id);
      for (const grant of writes.grants ?? []) {
        if (grant.permissions.length === 0) this.granted.delete(grant.keyId);
        else this.granted.set(grant.keyId, grant);
      }
      this.trail.push(...writes.events);
      return writes.result;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  async read(): Promise<CatalogueState> {
    return this;
  }

  async listAudit(afterSequence: number, capabilityId: string | undefined, limit: number): Promise<SequencedAuditEvent[]> {
    const found: SequencedAuditEvent[] = [];
    for (let index = Math.max(0, afterSequence - this.firstSequence + 1); index < this.trail.length && found.length < limit; index++) {
      const event = this.trail[index]!;
      if (capabilityId === undefined || event.capabilityId === capabilityId) found.push({ sequence: this.firstSequence + index, event });
    }
    return found;
  }

  async pruneAudit(beforeMs: number, limit: number): Promise<number> {
    let drop = 0;
    while (drop < limit && drop < this.trail.length - 1 && timestampMs(this.trail[drop]!.at!) < beforeMs) drop++;
    this.trail.splice(0, drop);
    this.firstSequence += drop;
    return drop;
  }
}
