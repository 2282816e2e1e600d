// Pinned keys, the registry's directory and its capability catalogue in
// SQLite. The catalogue is small and read whole by every match, so its
// records and grants stay decoded in memory; the audit trail stays on disk.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import type Database from "better-sqlite3";
import {
  AuditEventSchema,
  GovernedCapabilitySchema,
  PermissionGrantSchema,
  RegisteredAgentSchema,
  type GovernedCapability,
  type PermissionGrant,
} from "../../../gen/synapse/v1/registry_pb.js";
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
import { recordedAtMs } from "../registry-storage.js";

interface PinRow {
  agent_id: string;
  key_id: string;
  public_key: Buffer;
  pinned_at_ms: number;
}

const pinFromRow = (row: PinRow): PinnedKey => ({ agentId: row.agent_id, keyId: row.key_id, publicKey: new Uint8Array(row.public_key), pinnedAtMs: row.pinned_at_ms });

export class SqlitePinStore implements PinStore {
  private readonly sql;

  constructor(db: Database.Database) {
    this.sql = {
      get: db.prepare("SELECT * FROM pinned_keys WHERE agent_id = ?"),
      byKey: db.prepare("SELECT * FROM pinned_keys WHERE key_id = ? LIMIT 1"),
      insert: db.prepare("INSERT INTO pinned_keys (agent_id, key_id, public_key, pinned_at_ms) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"),
    };
  }

  async getPin(agentId: string): Promise<PinnedKey | undefined> {
    const row = this.sql.get.get(agentId) as PinRow | undefined;
    return row === undefined ? undefined : pinFromRow(row);
  }

  async findPinByKeyId(keyId: string): Promise<PinnedKey | undefined> {
    const row = this.sql.byKey.get(keyId) as PinRow | undefined;
    return row === undefined ? undefined : pinFromRow(row);
  }

  async pin(entry: PinnedKey): Promise<PinnedKey> {
    if (this.sql.insert.run(entry.agentId, entry.keyId, Buffer.from(entry.publicKey), entry.pinnedAtMs).changes > 0) return entry;
    return (await this.getPin(entry.agentId))!;
  }
}

interface AgentRow {
  agent_id: string;
  key_id: string;
  public_key: Buffer;
  agent: Buffer;
  lease_until_ms: number;
  version: number;
}

const entryFromRow = (row: AgentRow): DirectoryEntry => ({
  agentId: row.agent_id,
  keyId: row.key_id,
  publicKey: new Uint8Array(row.public_key),
  agent: fromBinary(RegisteredAgentSchema, row.agent),
  leaseUntilMs: row.lease_until_ms,
  version: row.version,
});

export class SqliteDirectoryStorage implements DirectoryStorage {
  private readonly sql;

  constructor(private readonly db: Database.Database) {
    this.sql = {
      get: db.prepare("SELECT * FROM registry_agents WHERE agent_id = ?"),
      byKey: db.prepare("SELECT * FROM registry_agents WHERE key_id = ? LIMIT 1"),
      all: db.prepare("SELECT * FROM registry_agents"),
      count: db.prepare("SELECT COUNT(*) AS n FROM registry_agents"),
      insert: db.prepare("INSERT INTO registry_agents (agent_id, key_id, public_key, agent, lease_until_ms, version) VALUES (?, ?, ?, ?, ?, 1)"),
      update: db.prepare("UPDATE registry_agents SET public_key = ?, agent = ?, lease_until_ms = ?, version = version + 1 WHERE agent_id = ? AND key_id = ? AND version = ?"),
      delete: db.prepare("DELETE FROM registry_agents WHERE agent_id = ?"),
      deleteAt: db.prepare("DELETE FROM registry_agents WHERE agent_id = ? AND version = ?"),
    };
  }

  async getAgent(agentId: string): Promise<DirectoryEntry | undefined> {
    const row = this.sql.get.get(agentId) as AgentRow | undefined;
    return row === undefined ? undefined : entryFromRow(row);
  }

  async findAgentByKeyId(keyId: string): Promise<DirectoryEntry | undefined> {
    const row = this.sql.byKey.get(keyId) as AgentRow | undefined;
    return row === undefined ? undefined : entryFromRow(row);
  }

  async listAgents(): Promise<DirectoryEntry[]> {
    return (this.sql.all.all() as AgentRow[]).map(entryFromRow);
  }

  async countAgents(): Promise<number> {
    return (this.sql.count.get() as { n: number }).n;
  }

  async putAgent(entry: NewDirectoryEntry) {
    return this.db.transaction(() => {
      const held = this.sql.get.get(entry.agentId) as AgentRow | undefined;
      if (held !== undefined && held.key_id !== entry.keyId) return { held: entryFromRow(held) };
      const agent = Buffer.from(toBinary(RegisteredAgentSchema, entry.agent));
      if (held === undefined) this.sql.insert.run(entry.agentId, entry.keyId, Buffer.from(entry.publicKey), agent, entry.leaseUntilMs);
      else this.sql.update.run(Buffer.from(entry.publicKey), agent, entry.leaseUntilMs, entry.agentId, entry.keyId, held.version);
      return { entry: { ...entry, version: (held?.version ?? 0) + 1 } };
    })();
  }

  async updateAgent(entry: NewDirectoryEntry, expectedVersion: number): Promise<DirectoryEntry | undefined> {
    const agent = Buffer.from(toBinary(RegisteredAgentSchema, entry.agent));
    const changed = this.sql.update.run(Buffer.from(entry.publicKey), agent, entry.leaseUntilMs, entry.agentId, entry.keyId, expectedVersion).changes;
    return changed > 0 ? { ...entry, version: expectedVersion + 1 } : undefined;
  }

  async deleteAgent(agentId: string, expectedVersion?: number): Promise<boolean> {
    const result = expectedVersion === undefined ? this.sql.delete.run(agentId) : this.sql.deleteAt.run(agentId, expectedVersion);
    return result.changes > 0;
  }
}

/** The catalogue's records, decoded once and kept current by the process that owns the database. */
export class SqliteCatalogueStorage implements CatalogueStorage, CatalogueState {
  private readonly records = new Map<string, GovernedCapability>();
  private readonly granted = new Map<string, PermissionGrant>();
  private lastSequence: number;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly sql;

  constructor(private readonly db: Database.Database) {
    this.sql = {
      upsert: db.prepare("INSERT INTO catalogue_capabilities (id, record) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record"),
      remove: db.prepare("DELETE FROM catalogue_capabilities WHERE id = ?"),
      appendAudit: db.prepare("INSERT INTO catalogue_audit (sequence, capability_id, event, recorded_at_ms) VALUES (?, ?, ?, ?)"),
      pruneAudit: db.prepare(
        `DELETE FROM catalogue_audit WHERE sequence IN (
           SELECT sequence FROM catalogue_audit WHERE recorded_at_ms < ? AND sequence < (SELECT MAX(sequence) FROM catalogue_audit) ORDER BY sequence LIMIT ?)`,
      ),
      bump: db.prepare("UPDATE catalogue_meta SET version = version + 1 WHERE id = 1"),
      putGrant: db.prepare("INSERT INTO catalogue_grants (key_id, record) VALUES (?, ?) ON CONFLICT (key_id) DO UPDATE SET record = excluded.record"),
      deleteGrant: db.prepare("DELETE FROM catalogue_grants WHERE key_id = ?"),
      audit: db.prepare("SELECT sequence, event FROM catalogue_audit WHERE sequence > ? ORDER BY sequence LIMIT ?"),
      auditOf: db.prepare("SELECT sequence, event FROM catalogue_audit WHERE capability_id = ? AND sequence > ? ORDER BY sequence LIMIT ?"),
    };
    for (const row of db.prepare("SELECT record FROM catalogue_capabilities").all() as Array<{ record: Buffer }>) {
      const record = fromBinary(GovernedCapabilitySchema, row.record);
      this.records.set(record.id, record);
    }
    for (const row of db.prepare("SELECT record FROM catalogue_grants").all() as Array<{ record: Buffer }>) {
      const grant = fromBinary(PermissionGrantSchema, row.record);
      this.granted.set(grant.keyId, grant);
    }
    this.lastSequence = (db.prepare("SELECT COALESCE(MAX(sequence), 0) AS n FROM catalogue_audit").get() as { n: number }).n;
  }

  getCapability(id: string): GovernedCapability | undefined {
    return this.records.get(id);
  }

  capabilities(): Iterable<GovernedCapability> {
    return this.records.values();
  }

  lastAuditSequence(): number {
    return this.lastSequence;
  }

  getGrant(keyId: string): PermissionGrant | undefined {
    return this.granted.get(keyId);
  }

  grants(): Iterable<PermissionGrant> {
    return this.granted.values();
  }

  update<T>(work: (state: CatalogueState) => CatalogueWrites<T>): Promise<T> {
    const run = this.queue.then(() => {
      const writes = work(this);
      this.db.transaction(() => {
        for (const capability of writes.capabilities) this.sql.upsert.run(capability.id, Buffer.from(toBinary(GovernedCapabilitySchema, capability)));
        for (const id of writes.removed ?? []) this.sql.remove.run(id);
        for (const grant of writes.grants ?? []) {
          if (grant.permissions.length === 0) this.sql.deleteGrant.run(grant.keyId);
          else this.sql.putGrant.run(grant.keyId, Buffer.from(toBinary(PermissionGrantSchema, grant)));
        }
        writes.events.forEach((event, index) =>
          this.sql.appendAudit.run(this.lastSequence + index + 1, event.capabilityId, Buffer.from(toBinary(AuditEventSchema, event)), recordedAtMs(event)),
        );
        this.sql.bump.run();
      })();
      for (const capability of writes.capabilities) this.records.set(capability.id, capability);
      for (const id of writes.removed ?? []) this.records.delete(id);
      for (const grant of writes.grants ?? []) {
        if (grant.permissions.length === 0) this.granted.delete(grant.keyId);
        else this.granted.set(grant.keyId, grant);
      }
      this.lastSequence += writes.events.length;
      return writes.result;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  async read(): Promise<CatalogueState> {
    return this;
  }

  async listAudit(afterSequence: number, capabilityId: string | undefined, limit: number): Promise<SequencedAuditEvent[]> {
    const rows = (capabilityId === undefined ? this.sql.audit.all(afterSequence, limit) : this.sql.auditOf.all(capabilityId, afterSequence, limit)) as Array<{
      sequence: number;
      event: Buffer;
    }>;
    return rows.map((row) => ({ sequence: row.sequence, event: fromBinary(AuditEventSchema, row.event) }));
  }

  async pruneAudit(beforeMs: number, limit: number): Promise<number> {
    return this.sql.pruneAudit.run(beforeMs, limit).changes;
  }
}
