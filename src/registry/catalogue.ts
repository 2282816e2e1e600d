// The governed capability catalogue of seed 003: GovernedCapability records
// under the governance rules of §8 (governance.ts), who may change them
// (catalogue-access.ts), the permissions the registry grants (grants.ts),
// their audit trail, and matching an Ontology to ranked candidates
// (matching.ts). Reading it a page at a time is catalogue-queries.ts.
//
// Storage: every operation runs alone against the current records
// (CatalogueStorage.update), checks first and then hands back all its
// record writes and audit events to commit at once, so a refused operation
// changes nothing but the audit trail (its REFUSED event), also with several
// registry instances on one store.
import { clone } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import type { SupportedTaskType } from "../../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  AuditEventKind,
  CapabilityHealth,
  CapabilityStatus,
  GovernedCapabilitySchema,
  PermissionGrantSchema,
  type CapabilityMatch,
  type GovernedCapability,
  type Ontology,
  type PermissionGrant,
} from "../../gen/synapse/v1/registry_pb.js";
import { silentLogger, type Logger } from "../log.js";
import { protocolError } from "../protocol/errors.js";
import { MemoryCatalogueStorage } from "../store/memory/registry.js";
import type { CatalogueState, CatalogueStorage } from "../store/registry-storage.js";
import { actorKeyId, actorName, CatalogueAccess, owns, Refusal, type Actor, type CallerIdentity } from "./catalogue-access.js";
import { Batch } from "./catalogue-batch.js";
import { compareStrings, compareVersions } from "./catalogue-order.js";
import {
  listAudit,
  listCapabilities,
  listGrants,
  type AuditPage,
  type CapabilityPage,
  type GrantPage,
  type ListAuditQuery,
  type ListCapabilitiesQuery,
  type ListGrantsQuery,
} from "./catalogue-queries.js";
import { checkGovernance, governanceError, isKnownStatus, statusName } from "./governance.js";
import { checkGranteeKeyId, grantedPermissions, normalPermissions, stageGrant } from "./grants.js";
import { DEFAULT_MATCH_LIMIT, isMatchable, rankCandidates, sameLineage } from "./matching.js";
import { capabilityFromTaskType, defaultCapabilityId } from "./task-capabilities.js";

export { checkGovernance } from "./governance.js";
export { capabilityFromTaskType, defaultCapabilityId, DEFAULT_TASK_CAPABILITY_VERSION } from "./task-capabilities.js";
export { compareVersions } from "./catalogue-order.js";
export type { Actor, CallerIdentity } from "./catalogue-access.js";
export type { AuditPage, CapabilityPage, GrantPage, ListAuditQuery, ListCapabilitiesQuery, ListGrantsQuery } from "./catalogue-queries.js";

/** The actor of changes the registry makes itself (supersession, leases). */
export const REGISTRY_ACTOR = "registry";

/** The operations' names, as audit events record them: the RPC each serves. */
const ACTION = {
  register: "RegisterCapability",
  setStatus: "SetCapabilityStatus",
  grant: "SetPermissionGrant",
  sync: "Register",
  retire: "Deregister",
} as const;

// ---------------------------------------------------------------------------
// Options

export interface CatalogueOptions {
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
  storage?: CatalogueStorage;
  /** Key ids of the registry's operators, who may change any capability and the grants. */
  admins?: Iterable<string>;
  logger?: Logger;
}

// ---------------------------------------------------------------------------
// The catalogue

export class CapabilityCatalogue {
  private readonly now: () => number;
  private readonly storage: CatalogueStorage;
  readonly access: CatalogueAccess;
  private readonly logger: Logger;

  constructor(options: CatalogueOptions = {}) {
    this.now = options.now ?? Date.now;
    this.storage = options.storage ?? new MemoryCatalogueStorage();
    this.access = new CatalogueAccess(options.admins);
    this.logger = options.logger ?? silentLogger;
  }

  /**
   * Adds a capability, or a new state of an existing id, under the rules of
   * seed 003 §8; each broken rule is INVALID_ARGUMENT naming it in
   * ErrorDetail.details.rule. Only the lineage's owner or an admin (see
   * catalogue-access.ts) may; a refusal is PERMISSION_DENIED, audited.
   * Audited: REGISTERED for a new id; VERSION_CHANGED and STATUS_CHANGED for
   * an existing one. An ACTIVE registration makes the other ACTIVE version of
   * its code INACTIVE.
   */
  register(capability: GovernedCapability, actor: Actor): Promise<GovernedCapability> {
    return this.guarded(ACTION.register, (batch) => clone(GovernedCapabilitySchema, this.stage(batch, capability, actor)));
  }

  async get(id: string): Promise<GovernedCapability | undefined> {
    const record = (await this.storage.read()).getCapability(id);
    return record === undefined ? undefined : clone(GovernedCapabilitySchema, record);
  }

  /** Ordered by code, then version (v1.9 before v1.10), then agent and id. */
  async list(query: ListCapabilitiesQuery = {}): Promise<CapabilityPage> {
    return listCapabilities(await this.storage.read(), query);
  }

  /**
   * Changes a capability's status (audited as STATUS_CHANGED: who, when,
   * from, to, why) and, unless `health` is UNSPECIFIED, its health. The
   * owner or an admin only. Activating a version supersedes the other ACTIVE
   * one of its code.
   */
  async setStatus(id: string, status: CapabilityStatus, reason: string, actor: Actor, health: CapabilityHealth = CapabilityHealth.UNSPECIFIED): Promise<GovernedCapability> {
    if (!isKnownStatus(status)) throw governanceError("status_required", "a capability needs a status: active, inactive, offline or deprecated");
    requireKnownHealth(health);
    return this.guarded(ACTION.setStatus, (batch) => {
      const current = batch.get(id);
      if (current === undefined) throw notFound(id);
      this.access.authorizeChange(actor, current, statusName(current.status), statusName(status));
      const record = batch.edit(id);
      const statusChanged = record.status !== status;
      if (statusChanged) {
        batch.audit(AuditEventKind.STATUS_CHANGED, record, actor, statusName(record.status), statusName(status), reason);
        record.status = status;
      }
      const healthChanged = health !== CapabilityHealth.UNSPECIFIED && record.health !== health;
      if (healthChanged) record.health = health;
      if (statusChanged || healthChanged) record.updatedAt = batch.timestamp;
      if (statusChanged && status === CapabilityStatus.ACTIVE) this.supersede(batch, record, actor);
      return clone(GovernedCapabilitySchema, record);
    });
  }

  /**
   * The candidates for an ontology and the permissions held, best first (the
   * 8 steps of seed 003 §5, see matching.ts). The caller decides what is
   * held: the registry's RPC passes what it grants (permissionsOf).
   */
  async match(ontology: Ontology, permissions: readonly string[], limit = DEFAULT_MATCH_LIMIT): Promise<CapabilityMatch[]> {
    return rankCandidates((await this.storage.read()).capabilities(), ontology, permissions, limit);
  }

  /** What the registry grants a caller (its key's grant and "*"), sorted; nothing for an anonymous one. */
  async permissionsOf(caller: CallerIdentity | undefined): Promise<string[]> {
    return grantedPermissions(await this.storage.read(), caller);
  }

  /** Replaces the permissions granted to a key id or "*" (none removes the grant). Admins only; audited as GRANT_CHANGED. */
  setGrant(keyId: string, permissions: readonly string[], reason: string, actor: Actor): Promise<PermissionGrant> {
    return this.guarded(ACTION.grant, (batch) => {
      this.access.authorizeGrant(actor, keyId, (batch.getGrant(keyId)?.permissions ?? []).join(","), permissions.join(","));
      checkGranteeKeyId(keyId);
      return clone(PermissionGrantSchema, stageGrant(batch, keyId, normalPermissions(permissions), reason, actor));
    });
  }

  /** Grants ordered by key id, of one key when given. */
  async listGrants(query: ListGrantsQuery = {}): Promise<GrantPage> {
    return listGrants(await this.storage.read(), query);
  }

  /** The audit trail, oldest first. */
  async listAudit(query: ListAuditQuery = {}): Promise<AuditPage> {
    return listAudit(this.storage, query);
  }

  /**
   * Lists what an agent provides: registers or updates each capability (with
   * agent_id set; an empty id defaults to "cap_<agent>_<code>_<version>"),
   * and takes its ACTIVE or DEPRECATED capabilities no longer listed OFFLINE.
   * A capability whose lineage belongs to another identity (the same agent id
   * under another key) is left out, audited as REFUSED; otherwise all or
   * nothing: one capability breaking a rule refuses the whole list. Returns
   * the ids listed, in the order given.
   */
  syncAgent(agentId: string, capabilities: readonly GovernedCapability[], actor: Actor): Promise<string[]> {
    requireAgentId(agentId);
    return this.guarded(ACTION.sync, (batch) => {
      const ids: string[] = [];
      for (const capability of capabilities) {
        const input = clone(GovernedCapabilitySchema, capability);
        input.agentId = agentId;
        try {
          ids.push(this.stage(batch, input, actor).id);
        } catch (error) {
          if (!(error instanceof Refusal)) throw error;
          this.recordRefusal(batch, error, ACTION.sync);
        }
      }
      const listed = new Set(ids);
      for (const record of batch.all()) {
        if (record.agentId !== agentId || listed.has(record.id) || !isMatchable(record.status)) continue;
        if (typeof actor !== "string" && !owns(actor, record)) continue;
        this.changeStatus(batch, record.id, CapabilityStatus.OFFLINE, `no longer provided by agent ${agentId}`, actor);
      }
      return ids;
    });
  }

  /**
   * Sets the health of every capability an agent provides (it follows the
   * agent's lease); with `keyId`, only those of the agent under that key.
   * Health is not a governed field, so it is not audited. Returns the ids
   * whose health changed.
   */
  setAgentHealth(agentId: string, health: CapabilityHealth, actor: Actor, keyId = ""): Promise<string[]> {
    requireAgentId(agentId); // an empty id would select every static capability
    void actor; // kept for the caller's symmetry with the audited changes; AuditEventKind has no health kind
    return this.storage.update((state) => {
      const batch = this.batch(state, "");
      const changed: string[] = [];
      for (const record of batch.all()) {
        if (!providedBy(record, agentId, keyId) || record.health === health) continue;
        const edited = batch.edit(record.id);
        edited.health = health;
        edited.updatedAt = batch.timestamp;
        changed.push(record.id);
      }
      return batch.writes(changed.sort(compareStrings));
    });
  }

  /**
   * Takes every capability of an agent (with `keyId`, under that key) OFFLINE,
   * audited. With `forget`, the records its registrations made (owned by the
   * agent under `keyId`) are then removed: an agent that left, or was
   * dropped, leaves only its audit events (kept for the retention period);
   * records an operator listed for it stay, OFFLINE. Returns the ids changed.
   */
  retireAgent(agentId: string, reason: string, actor: Actor, keyId = "", options: { forget?: boolean } = {}): Promise<string[]> {
    requireAgentId(agentId);
    return this.guarded(ACTION.retire, (batch) => {
      const changed: string[] = [];
      for (const record of batch.all().sort((a, b) => compareStrings(a.id, b.id))) {
        if (!providedBy(record, agentId, keyId)) continue;
        if (record.status !== CapabilityStatus.OFFLINE) {
          this.access.authorizeChange(actor, record, statusName(record.status), statusName(CapabilityStatus.OFFLINE));
          this.changeStatus(batch, record.id, CapabilityStatus.OFFLINE, reason || `agent ${agentId} retired`, actor);
          changed.push(record.id);
        }
        if (options.forget && keyId !== "" && record.ownerAgentId === agentId && record.ownerKeyId === keyId) batch.remove(record.id);
      }
      return changed;
    });
  }

  /** Deletes audit events recorded before `beforeMs` (the newest always stays), at most `limit`. */
  pruneAudit(beforeMs: number, limit: number): Promise<number> {
    return this.storage.pruneAudit(beforeMs, limit);
  }

  /** The catalogue entry an agent's task type declares (see capabilityFromTaskType). */
  fromTaskType(agentId: string, taskType: SupportedTaskType): GovernedCapability | undefined {
    return capabilityFromTaskType(agentId, taskType);
  }

  // -------------------------------------------------------------------------

  private batch(state: CatalogueState, action: string): Batch {
    return new Batch(state, this.now(), action);
  }

  /**
   * Runs one operation. A Refusal commits only its REFUSED audit event and
   * then answers PERMISSION_DENIED; any other error commits nothing.
   */
  private async guarded<T>(action: string, work: (batch: Batch) => T): Promise<T> {
    const outcome = await this.storage.update((state) => {
      const batch = this.batch(state, action);
      try {
        return batch.writes<{ ok: true; value: T } | { ok: false; refusal: Refusal }>({ ok: true, value: work(batch) });
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        const refused = this.batch(state, action);
        this.recordRefusal(refused, error, action);
        return refused.writes<{ ok: false; refusal: Refusal }>({ ok: false, refusal: error });
      }
    });
    if (outcome.ok) return outcome.value;
    throw outcome.refusal.toConnectError(action);
  }

  private recordRefusal(batch: Batch, refusal: Refusal, action: string): void {
    const { change, caller } = refusal;
    batch.audit(AuditEventKind.REFUSED, { id: change.capabilityId, code: change.capabilityCode }, caller, change.from, change.to, refusal.message, change.granteeKeyId);
    this.logger.warn(
      { actor: actorName(caller), actor_key_id: actorKeyId(caller), action, capability_id: change.capabilityId, grantee_key_id: change.granteeKeyId, rule: refusal.rule },
      "catalogue change refused",
    );
  }

  /** Checks who may make one registration, validates it, and stages its record and audit events in the batch. */
  private stage(batch: Batch, input: GovernedCapability, actor: Actor): GovernedCapability {
    const record = clone(GovernedCapabilitySchema, input);
    if (record.id.trim() === "") record.id = defaultCapabilityId(record);
    const previous = batch.get(record.id);
    const lineage = batch.all().filter((other) => sameLineage(other, record));
    const owner = this.access.authorizeRegistration(actor, record, previous, lineage);
    checkGovernance(record);
    requireKnownHealth(record.health);
    if (previous !== undefined && (previous.code !== record.code || previous.agentId !== record.agentId)) {
      throw governanceError("id_in_use", `capability id ${record.id} belongs to code ${previous.code}${previous.agentId ? ` of agent ${previous.agentId}` : ""}`, {
        id: record.id,
      });
    }
    record.ownerAgentId = owner.agentId;
    record.ownerKeyId = owner.keyId;
    record.createdAt = previous?.createdAt ?? batch.timestamp;
    record.updatedAt = batch.timestamp;
    batch.put(record);
    if (previous === undefined) {
      batch.audit(AuditEventKind.REGISTERED, record, actor, "", record.version, "");
    } else {
      if (previous.version !== record.version) batch.audit(AuditEventKind.VERSION_CHANGED, record, actor, previous.version, record.version, "re-registered");
      if (previous.status !== record.status) {
        batch.audit(AuditEventKind.STATUS_CHANGED, record, actor, statusName(previous.status), statusName(record.status), "re-registered");
      }
    }
    if (record.status === CapabilityStatus.ACTIVE) this.supersede(batch, record, actor);
    return record;
  }

  /** Makes the other ACTIVE versions of the record's lineage INACTIVE and records the code's version change. */
  private supersede(batch: Batch, current: GovernedCapability, actor: Actor): void {
    const older = batch
      .all()
      .filter((record) => record.id !== current.id && sameLineage(record, current) && record.status === CapabilityStatus.ACTIVE)
      .sort((a, b) => compareVersions(a.version, b.version) || compareStrings(a.id, b.id));
    for (const record of older) {
      this.changeStatus(batch, record.id, CapabilityStatus.INACTIVE, `superseded by ${current.version}`, REGISTRY_ACTOR);
      if (record.version !== current.version) {
        batch.audit(AuditEventKind.VERSION_CHANGED, current, actor, record.version, current.version, `supersedes ${record.id}`);
      }
    }
  }

  private changeStatus(batch: Batch, id: string, status: CapabilityStatus, reason: string, actor: Actor): void {
    const record = batch.edit(id);
    if (record.status === status) return;
    batch.audit(AuditEventKind.STATUS_CHANGED, record, actor, statusName(record.status), statusName(status), reason);
    record.status = status;
    record.updatedAt = batch.timestamp;
  }
}

/** Whether an agent provides the record; with a key id, under that key (records an admin listed for the agent have none). */
function providedBy(record: GovernedCapability, agentId: string, keyId: string): boolean {
  return record.agentId === agentId && (keyId === "" || record.ownerKeyId === "" || record.ownerKeyId === keyId);
}

/** INVALID_ARGUMENT for a health number CapabilityHealth does not name (UNSPECIFIED is known: "not reported"). */
function requireKnownHealth(health: CapabilityHealth): void {
  if (CapabilityHealth[health] === undefined) {
    throw protocolError(ErrorCode.INVALID_PARAMS, `unknown capability health ${health}`, { details: { field: "health" } });
  }
}

function notFound(id: string) {
  return protocolError(ErrorCode.INVALID_PARAMS, `no capability ${id}`, { status: Code.NotFound, details: { id } });
}

function requireAgentId(agentId: string): void {
  if (agentId.trim() === "") throw protocolError(ErrorCode.INVALID_PARAMS, "agent_id is required", { details: { field: "agent_id" } });
}
