// What a registry keeps: the agent directory (entries with their leases and
// the key each id is bound to) and the governed capability catalogue (its
// records, the permission grants and the audit trail). Several registry
// instances may share it.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { AuditEvent, GovernedCapability, PermissionGrant, RegisteredAgent } from "../../gen/synapse/v1/registry_pb.js";

/** When an audit event was recorded (its `at`), for keeping the trail by age. */
export function recordedAtMs(event: AuditEvent): number {
  return event.at === undefined ? 0 : timestampMs(event.at);
}

export interface DirectoryEntry {
  readonly agentId: string;
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  readonly agent: RegisteredAgent;
  readonly leaseUntilMs: number;
  /** Incremented by every write; updates name the version they expect. */
  readonly version: number;
}

export type NewDirectoryEntry = Omit<DirectoryEntry, "version">;

export interface DirectoryStorage {
  getAgent(agentId: string): Promise<DirectoryEntry | undefined>;
  findAgentByKeyId(keyId: string): Promise<DirectoryEntry | undefined>;
  listAgents(): Promise<DirectoryEntry[]>;
  /** How many entries the directory holds. */
  countAgents(): Promise<number>;
  /**
   * Inserts or replaces an agent's entry, unless the id is bound to another
   * key: then nothing changes and the entry holding the id comes back as `held`.
   */
  putAgent(entry: NewDirectoryEntry): Promise<{ entry: DirectoryEntry; held?: undefined } | { entry?: undefined; held: DirectoryEntry }>;
  /** Replaces an entry still at expectedVersion; undefined when it changed or is gone. */
  updateAgent(entry: NewDirectoryEntry, expectedVersion: number): Promise<DirectoryEntry | undefined>;
  /** Deletes an entry (only at expectedVersion, when given); false when nothing was deleted. */
  deleteAgent(agentId: string, expectedVersion?: number): Promise<boolean>;
}

export interface SequencedAuditEvent {
  /** 1, 2, 3, … in the order events were committed. */
  readonly sequence: number;
  readonly event: AuditEvent;
}

/** The catalogue as one operation sees it: records handed out are owned by the storage. */
export interface CatalogueState {
  getCapability(id: string): GovernedCapability | undefined;
  /** Every record, in any order. */
  capabilities(): Iterable<GovernedCapability>;
  /** The sequence of the newest audit event; 0 when there is none. */
  lastAuditSequence(): number;
  /** The permissions granted to a key id (or "*"), if any. */
  getGrant(keyId: string): PermissionGrant | undefined;
  /** Every grant, in any order. */
  grants(): Iterable<PermissionGrant>;
}

/**
 * One operation's writes: records to put, records to remove (by id, after
 * the puts), grants to put (one without permissions is deleted), and audit
 * events to append (sequences following lastAuditSequence).
 */
export interface CatalogueWrites<T> {
  result: T;
  capabilities: readonly GovernedCapability[];
  removed?: readonly string[];
  events: readonly AuditEvent[];
  grants?: readonly PermissionGrant[];
}

export interface CatalogueStorage {
  /** Runs `work` alone against the current state and commits its writes at once; a throw changes nothing. */
  update<T>(work: (state: CatalogueState) => CatalogueWrites<T>): Promise<T>;
  /** The current state, for reading. */
  read(): Promise<CatalogueState>;
  /** Audit events after `afterSequence`, oldest first, of one capability when given; at most `limit`. */
  listAudit(afterSequence: number, capabilityId: string | undefined, limit: number): Promise<SequencedAuditEvent[]>;
  /**
   * Deletes audit events recorded before `beforeMs`, oldest first, at most
   * `limit`; the newest event always stays (sequences go on from it).
   * Returns how many were deleted.
   */
  pruneAudit(beforeMs: number, limit: number): Promise<number>;
}
