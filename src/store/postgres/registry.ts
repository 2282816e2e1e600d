// Pinned keys, the registry's directory and its capability catalogue in
// PostgreSQL, shared by several registry instances. Catalogue operations
// take an advisory lock and re-read the records and grants when another
// instance changed them (a version counter says so); the audit trail stays
// on disk.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import type pg from "pg";
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
import { LOCKS, transaction, type Database, type Queryable } from "./database.js";

interface PinRow {
  agent_id: string;
  key_id: string;
  public_key: Buffer;
  pinned_at_ms: number;
}

const pinFromRow = (row: PinRow): PinnedKey => ({ agentId: row.agent_id, keyId: row.key_id, publicKey: new Uint8Array(row.public_key), pinnedAtMs: row.pinned_at_ms });

export class PostgresPinStore implements PinStore {
  constructor(private readonly pool: Database) {}

  async getPin(agentId: string): Promise<PinnedKey | undefined> {
    const { rows } = await this.pool.query<PinRow>("SELECT * FROM pinned_keys WHERE agent_id = $1", [agentId]);
    return rows[0] === undefined ? undefined : pinFromRow(rows[0]);
  }

  async findPinByKeyId(keyId: string): Promise<PinnedKey | undefined> {
    const { rows } = await this.pool.query<PinRow>("SELECT * FROM pinned_keys WHERE key_id = $1 LIMIT 1", [keyId]);
    return rows[0] === undefined ? undefined : pinFromRow(rows[0]);
  }

  async pin(entry: PinnedKey): Promise<PinnedKey> {
    const { rowCount } = await this.pool.query(
      "INSERT INTO pinned_keys (agent_id, key_id, public_key, pinned_at_ms) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
      [entry.agentId, entry.keyId, Buffer.from(entry.publicKey), entry.pinnedAtMs],
    );
    return rowCount ? entry : (await this.getPin(entry.agentId))!;
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

export class PostgresDirectoryStorage implements DirectoryStorage {
  constructor(private readonly pool: Database) {}

  async getAgent(agentId: string): Promise<DirectoryEntry | undefined> {
    const { rows } = await this.pool.query<AgentRow>("SELECT * FROM registry_agents WHERE agent_id = $1", [agentId]);
    return rows[0] === undefined ? undefined : entryFromRow(rows[0]);
  }

  async findAgentByKeyId(keyId: string): Promise<DirectoryEntry | undefined> {
    const { rows } = await this.pool.query<AgentRow>("SELECT * FROM registry_agents WHERE key_id = $1 LIMIT 1", [keyId]);
    return rows[0] === undefined ? undefined : entryFromRow(rows[0]);
  }

  async listAgents(): Promise<DirectoryEntry[]> {
    return (await this.pool.query<AgentRow>("SELECT * FROM registry_agents")).rows.map(entryFromRow);
  }

  async countAgents(): Promise<number> {
    return Number((await this.pool.query("SELECT COUNT(*) AS n FROM registry_agents")).rows[0]!.n);
  }

  async putAgent(entry: NewDirectoryEntry) {
    // An id already bound to another key is left alone: the WHERE of the upsert refuses it.
    const { rows } = await this.pool.query<AgentRow>(
      `INSERT INTO registry_agents (agent_id, key_id, public_key, agent, lease_until_ms, version) VALUES ($1, $2, $3, $4, $5, 1)
       ON CONFLICT (agent_id) DO UPDATE SET public_key = EXCLUDED.public_key, agent = EXCLUDED.agent, lease_until_ms = EXCLUDED.lease_until_ms,
         version = registry_agents.version + 1
       WHERE registry_agents.key_id = EXCLUDED.key_id
       RETURNING *`,
      [entry.agentId, entry.keyId, Buffer.from(entry.publicKey), Buffer.from(toBinary(RegisteredAgentSchema, entry.agent)), entry.leaseUntilMs],
    );
    if (rows[0] !== undefined) return { entry: entryFromRow(rows[0]) };
    return { held: (await this.getAgent(entry.agentId))! };
  }

  async updateAgent(entry: NewDirectoryEntry, expectedVersion: number): Promise<DirectoryEntry | undefined> {
    const { rows } = await this.pool.query<AgentRow>(
      `UPDATE registry_agents SET public_key = $1, agent = $2, lease_until_ms = $3, version = version + 1
       WHERE agent_id = $4 AND key_id = $5 AND version = $6 RETURNING *`,
      [Buffer.from(entry.publicKey), Buffer.from(toBinary(RegisteredAgentSchema, entry.agent)), entry.leaseUntilMs, entry.agentId, entry.keyId, expectedVersion],
    );
    return rows[0] === undefined ? undefined : entryFromRow(rows[0]);
  }

  async deleteAgent(agentId: string, expectedVersion?: number): Promise<boolean> {
    const { rowCount } =
      expectedVersion === undefined
        ? await this.pool.query("DELETE FROM registry_agents WHERE agent_id = $1", [agentId])
        : await this.pool.query("DELETE FROM registry_agents WHERE agent_id = $1 AND version = $2", [agentId, expectedVersion]);
    return (rowCount ?? 0) > 0;
  }
}

class Snapshot implements CatalogueState {
  constructor(
    readonly records: Map<string, GovernedCapability>,
    readonly granted: Map<string, PermissionGrant>,
    readonly sequence: number,
  ) {}

  getGrant(keyId: string): PermissionGrant | undefined {
    return this.granted.get(keyId);
  }

  grants(): Iterable<PermissionGrant> {
    return this.granted.values();
  }

  getCapability(id: string): GovernedCapability | undefined {
    return this.records.get(id);
  }

  capabilities(): Iterable<GovernedCapability> {
    return this.records.values();
  }

  lastAuditSequence(): number {
    return this.sequence;
  }
}

export class PostgresCatalogueStorage implements CatalogueStorage {
  private snapshot = new Snapshot(new Map(), new Map(), 0);
  private version = -1;

  constructor(private readonly pool: Database) {}

  /** The records as of `version`, read again when another instance changed them. */
  private async current(client: Queryable): Promise<Snapshot> {
    const version = Number((await client.query("SELECT version FROM catalogue_meta WHERE id = 1")).rows[0]!.version);
    if (version === this.version) return this.snapshot;
    const records = new Map<string, GovernedCapability>();
    for (const row of (await client.query<{ record: Buffer }>("SELECT record FROM catalogue_capabilities")).rows) {
      const record = fromBinary(GovernedCapabilitySchema, row.record);
      records.set(record.id, record);
    }
    const granted = new Map<string, PermissionGrant>();
    for (const row of (await client.query<{ record: Buffer }>("SELECT record FROM catalogue_grants")).rows) {
      const grant = fromBinary(PermissionGrantSchema, row.record);
      granted.set(grant.keyId, grant);
    }
    const sequence = Number((await client.query("SELECT COALESCE(MAX(sequence), 0) AS n FROM catalogue_audit")).rows[0]!.n);
    this.snapshot = new Snapshot(records, granted, sequence);
    this.version = version;
    return this.snapshot;
  }

  async update<T>(work: (state: CatalogueState) => CatalogueWrites<T>): Promise<T> {
    return transaction(this.pool, async (client) => {
      await client.query("SELECT pg_advisory_xact_lock($1)", [LOCKS.catalogue]);
      const state = await this.current(client);
      const writes = work(state);
      for (const capability of writes.capabilities) {
        await client.query("INSERT INTO catalogue_capabilities (id, record) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record", [
          capability.id,
          Buffer.from(toBinary(GovernedCapabilitySchema, capability)),
        ]);
      }
      for (const id of writes.removed ?? []) await client.query("DELETE FROM catalogue_capabilities WHERE id = $1", [id]);
      for (const grant of writes.grants ?? []) {
        if (grant.permissions.length === 0) await client.query("DELETE FROM catalogue_grants WHERE key_id = $1", [grant.keyId]);
        else {
          await client.query("INSERT INTO catalogue_grants (key_id, record) VALUES ($1, $2) ON CONFLICT (key_id) DO UPDATE SET record = EXCLUDED.record", [
            grant.keyId,
            Buffer.from(toBinary(PermissionGrantSchema, grant)),
          ]);
        }
      }
      let sequence = state.sequence;
      for (const event of writes.events) {
        sequence++;
        await client.query("INSERT INTO catalogue_audit (sequence, capability_id, event, recorded_at_ms) VALUES ($1, $2, $3, $4)", [
          sequence,
          event.capabilityId,
          Buffer.from(toBinary(AuditEventSchema, event)),
          recordedAtMs(event),
        ]);
      }
      const version = Number((await client.query("UPDATE catalogue_meta SET version = version + 1 WHERE id = 1 RETURNING version")).rows[0].version);
      // Only after the commit would a failure be impossible; until then the next operation re-reads.
      this.version = -1;
      const records = new Map(state.records);
      for (const capability of writes.capabilities) records.set(capability.id, capability);
      for (const id of writes.removed ?? []) records.delete(id);
      const granted = new Map(state.granted);
      for (const grant of writes.grants ?? []) {
        if (grant.permissions.length === 0) granted.delete(grant.keyId);
        else granted.set(grant.keyId, grant);
      }
      const next = new Snapshot(records, granted, sequence);
      return { result: writes.result, next, version };
    }).then(({ result, next, version }) => {
      this.snapshot = next;
      this.version = version;
      return result;
    });
  }

  read(): Promise<CatalogueState> {
    return this.current(this.pool);
  }

  async listAudit(afterSequence: number, capabilityId: string | undefined, limit: number): Promise<SequencedAuditEvent[]> {
    const { rows } =
      capabilityId === undefined
        ? await this.pool.query<{ sequence: number; event: Buffer }>("SELECT sequence, event FROM catalogue_audit WHERE sequence > $1 ORDER BY sequence LIMIT $2", [
            afterSequence,
            limit,
          ])
        : await this.pool.query<{ sequence: number; event: Buffer }>(
            "SELECT sequence, event FROM catalogue_audit WHERE capability_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
            [capabilityId, afterSequence, limit],
          );
    return rows.map((row) => ({ sequence: row.sequence, event: fromBinary(AuditEventSchema, row.event) }));
  }

  async pruneAudit(beforeMs: number, limit: number): Promise<number> {
    const { rowCount } = await this.pool.query(
      `DELETE FROM catalogue_audit WHERE sequence IN (
         SELECT sequence FROM catalogue_audit WHERE recorded_at_ms < $1 AND sequence < (SELECT MAX(sequence) FROM catalogue_audit) ORDER BY sequence LIMIT $2)`,
      [beforeMs, limit],
    );
    return rowCount ?? 0;
  }
}
