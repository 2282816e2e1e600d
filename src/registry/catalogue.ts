// The governed capability catalogue of seed 003: GovernedCapability records
// under the governance rules of §8, their audit trail, and matching an
// Ontology to ranked candidates (§4, §5, with the health degradation of §7).
//
// Matching, as implemented here (seed 003 §5 lists 8 steps without saying
// which filter and which rank):
//   Steps 6-8 are filters. 6: permission_required must be a subset of the
//   caller's permissions. 7: status must be ACTIVE or DEPRECATED (INACTIVE
//   and OFFLINE are never matched: "下线能力不能被 Orchestrator 调用").
//   8: only the current version of each code: the ACTIVE one, or when none
//   is active the newest DEPRECATED one.
//   Step 2 is a filter when ontology.domain is set: a capability with another
//   non-empty domain is out; an empty capability domain matches any domain
//   but scores below an exact match.
//   Steps 1, 3, 4, 5 rank, and a candidate must match at least one of those
//   the ontology gives (1: next_step maps to the capability type; 3: scenario
//   in scenarios; 4: shared risk signals; 5: intent in intents). With none of
//   them given, every capability that passes the filters is a candidate.
//   The score is lexicographic in step order, one decimal digit group each:
//     step 1 type 100000 | step 3 scenario 10000 | step 4 100 per shared
//     signal (at most 99 counted) | step 5 intent 10 | step 2 exact domain 1
//   so e.g. 110111 = type, scenario, one signal, intent, exact domain.
//   Final order: health (HEALTHY/UNSPECIFIED, DEGRADED, UNHEALTHY; §7 step 5),
//   then non-deprecated before DEPRECATED, then score descending, then code.
//
// Versions belong to a lineage: the code together with the providing agent
// (agent_id, empty for static entries). Supersession (one ACTIVE version
// per lineage) and step 8 work per lineage, so two agents offering the same
// task type are two candidates, not one replacing the other.
//
// Storage: every operation runs alone against the current records
// (CatalogueStorage.update), validates first and then hands back all its
// record writes and audit events to commit at once, so a refused operation
// changes nothing, also with several registry instances on one store.
import { clone, create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { Ajv } from "ajv";
import { RiskLevel, type SupportedTaskType } from "../../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  AuditEventKind,
  AuditEventSchema,
  CapabilityHealth,
  CapabilityMatchSchema,
  CapabilityStatus,
  CapabilityType,
  GovernedCapabilitySchema,
  type AuditEvent,
  type CapabilityMatch,
  type GovernedCapability,
  type Ontology,
} from "../../gen/synapse/v1/registry_pb.js";
import { protocolError } from "../protocol/errors.js";
import { MemoryCatalogueStorage } from "../store/memory/registry.js";
import type { CatalogueState, CatalogueStorage, CatalogueWrites } from "../store/registry-storage.js";

/** The actor of changes the registry makes itself (supersession, leases). */
export const REGISTRY_ACTOR = "registry";

export const DEFAULT_TASK_CAPABILITY_VERSION = "1.0.0";
const DEFAULT_LIST_PAGE_SIZE = 50;
const MAX_LIST_PAGE_SIZE = 500;
const DEFAULT_AUDIT_PAGE_SIZE = 100;
const MAX_AUDIT_PAGE_SIZE = 1000;
const DEFAULT_MATCH_LIMIT = 20;
const MAX_MATCH_LIMIT = 500;

// Score weights (see the header): each step owns its own decimal digits.
const SCORE_TYPE = 100_000;
const SCORE_SCENARIO = 10_000;
const SCORE_RISK_SIGNAL = 100;
const MAX_COUNTED_SIGNALS = 99;
const SCORE_INTENT = 10;
const SCORE_EXACT_DOMAIN = 1;

// ---------------------------------------------------------------------------
// Queries

export interface CatalogueOptions {
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
  storage?: CatalogueStorage;
}

export interface ListCapabilitiesQuery {
  /** UNSPECIFIED or absent: every type. */
  capabilityType?: CapabilityType;
  /** Exact domain; empty or absent: every domain. */
  domain?: string;
  /** Empty or absent: every status. */
  statuses?: readonly CapabilityStatus[];
  code?: string;
  /** 0 or absent: 50; at most 500. */
  pageSize?: number;
  pageToken?: string;
}

export interface CapabilityPage {
  capabilities: GovernedCapability[];
  /** Empty on the last page. */
  nextPageToken: string;
}

export interface ListAuditQuery {
  capabilityId?: string;
  /** 0 or absent: 100; at most 1000. */
  pageSize?: number;
  pageToken?: string;
}

export interface AuditPage {
  events: AuditEvent[];
  /** Empty on the last page. */
  nextPageToken: string;
}

// ---------------------------------------------------------------------------
// The catalogue

export class CapabilityCatalogue {
  private readonly now: () => number;
  private readonly storage: CatalogueStorage;

  constructor(options: CatalogueOptions = {}) {
    this.now = options.now ?? Date.now;
    this.storage = options.storage ?? new MemoryCatalogueStorage();
  }

  /**
   * Adds a capability, or a new state of an existing id, under the rules of
   * seed 003 §8; each refusal is INVALID_ARGUMENT naming its rule in
   * ErrorDetail.details.rule. Audited: REGISTERED for a new id; VERSION_CHANGED
   * and STATUS_CHANGED for an existing one. An ACTIVE registration makes the
   * other ACTIVE version of its code INACTIVE.
   */
  register(capability: GovernedCapability, actor: string): Promise<GovernedCapability> {
    return this.storage.update((state) => {
      const batch = this.batch(state);
      const stored = this.stage(batch, capability, actor);
      return batch.writes(clone(GovernedCapabilitySchema, stored));
    });
  }

  async get(id: string): Promise<GovernedCapability | undefined> {
    const record = (await this.storage.read()).getCapability(id);
    return record === undefined ? undefined : clone(GovernedCapabilitySchema, record);
  }

  /** Ordered by code, then version (v1.9 before v1.10), then agent and id. */
  async list(query: ListCapabilitiesQuery = {}): Promise<CapabilityPage> {
    const size = pageSizeOf(query.pageSize, DEFAULT_LIST_PAGE_SIZE, MAX_LIST_PAGE_SIZE);
    const cursor = query.pageToken ? decodeListCursor(query.pageToken) : undefined;
    const type = query.capabilityType ?? CapabilityType.UNSPECIFIED;
    const statuses = query.statuses && query.statuses.length > 0 ? new Set(query.statuses) : undefined;
    const selected = [...(await this.storage.read()).capabilities()]
      .filter(
        (record) =>
          (type === CapabilityType.UNSPECIFIED || record.capabilityType === type) &&
          (!query.domain || record.domain === query.domain) &&
          (!query.code || record.code === query.code) &&
          (statuses === undefined || statuses.has(record.status)) &&
          (cursor === undefined || compareListKeys(listKey(record), cursor) > 0),
      )
      .sort((a, b) => compareListKeys(listKey(a), listKey(b)));
    const page = selected.slice(0, size);
    const more = selected.length > page.length;
    return {
      capabilities: page.map((record) => clone(GovernedCapabilitySchema, record)),
      nextPageToken: more ? encodeToken(listKey(page[page.length - 1]!)) : "",
    };
  }

  /**
   * Changes a capability's status (audited as STATUS_CHANGED: who, when,
   * from, to, why) and, unless `health` is UNSPECIFIED, its health.
   * Activating a version supersedes the other ACTIVE one of its code.
   */
  async setStatus(id: string, status: CapabilityStatus, reason: string, actor: string, health: CapabilityHealth = CapabilityHealth.UNSPECIFIED): Promise<GovernedCapability> {
    if (!isKnownStatus(status)) throw governanceError("status_required", "a capability needs a status: active, inactive, offline or deprecated");
    if (CapabilityHealth[health] === undefined) {
      throw protocolError(ErrorCode.INVALID_PARAMS, `unknown capability health ${health}`, { details: { field: "health" } });
    }
    return this.storage.update((state) => this.applyStatus(this.batch(state), id, status, reason, actor, health));
  }

  private applyStatus(batch: Batch, id: string, status: CapabilityStatus, reason: string, actor: string, health: CapabilityHealth): CatalogueWrites<GovernedCapability> {
    if (batch.get(id) === undefined) throw notFound(id);
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
    return batch.writes(clone(GovernedCapabilitySchema, record));
  }

  /**
   * The candidates for an ontology and the caller's permissions, best first
   * (the 8 steps of seed 003 §5 as the header of this file interprets them).
   * An unrecognised next_step is INVALID_ARGUMENT.
   */
  async match(ontology: Ontology, permissions: readonly string[], limit = DEFAULT_MATCH_LIMIT): Promise<CapabilityMatch[]> {
    if (limit < 0) throw protocolError(ErrorCode.INVALID_PARAMS, "limit must not be negative", { details: { field: "limit" } });
    const max = Math.min(limit === 0 ? DEFAULT_MATCH_LIMIT : limit, MAX_MATCH_LIMIT);

    const nextStep = ontology.nextStep.trim();
    const wantedType = nextStep ? typeOfNextStep(nextStep) : undefined;
    const domain = normal(ontology.domain);
    const scenario = normal(ontology.scenario);
    const intent = normal(ontology.intent);
    const signals = [...new Set(ontology.riskSignals.map(normal).filter((signal) => signal !== ""))];
    const ranksGiven = wantedType !== undefined || scenario !== "" || intent !== "" || signals.length > 0;
    const held = new Set(permissions);

    const scored: Array<{ record: GovernedCapability; score: number; reasons: string[] }> = [];
    // Steps 7 and 8 first: only the current, matchable version of each lineage.
    for (const record of currentVersions((await this.storage.read()).capabilities())) {
      // Step 6.
      if (!record.permissionRequired.every((permission) => held.has(permission))) continue;
      // Step 2 (a filter only when a domain is given).
      const ownDomain = normal(record.domain);
      if (domain !== "" && ownDomain !== "" && ownDomain !== domain) continue;

      const typeHit = wantedType !== undefined && record.capabilityType === wantedType;
      const scenarioHit = scenario !== "" && record.scenarios.some((s) => normal(s) === scenario);
      const ownSignals = new Set(record.riskSignals.map(normal));
      const shared = signals.filter((signal) => ownSignals.has(signal));
      const intentHit = intent !== "" && record.intents.some((i) => normal(i) === intent);
      if (ranksGiven && !(typeHit || scenarioHit || shared.length > 0 || intentHit)) continue;

      const exactDomain = domain !== "" && ownDomain === domain;
      const score =
        (typeHit ? SCORE_TYPE : 0) +
        (scenarioHit ? SCORE_SCENARIO : 0) +
        Math.min(shared.length, MAX_COUNTED_SIGNALS) * SCORE_RISK_SIGNAL +
        (intentHit ? SCORE_INTENT : 0) +
        (exactDomain ? SCORE_EXACT_DOMAIN : 0);

      const reasons: string[] = [];
      if (wantedType !== undefined) {
        reasons.push(`step 1 next_step ${nextStep}: ${typeLabel(record.capabilityType)} capability${typeHit ? "" : `, not ${typeLabel(wantedType)}`}`);
      }
      if (domain !== "") reasons.push(`step 2 domain ${domain}: ${exactDomain ? "matched" : "any domain"}`);
      if (scenario !== "") reasons.push(`step 3 scenario ${scenario}: ${scenarioHit ? "matched" : "not served"}`);
      if (signals.length > 0) reasons.push(`step 4 risk_signals ${signals.join(",")}: ${shared.length > 0 ? `matched ${shared.join(",")}` : "none matched"}`);
      if (intent !== "") reasons.push(`step 5 intent ${intent}: ${intentHit ? "matched" : "not served"}`);
      reasons.push(`step 6 permissions: ${record.permissionRequired.length > 0 ? "covered" : "none required"}`);
      reasons.push(`step 7 status: ${statusLabel(record.status)}`);
      reasons.push(`step 8 version ${record.version}: current`);
      if (healthRank(record.health) > 0) reasons.push(`health: ${healthLabel(record.health)}, ranked after healthier capabilities`);
      scored.push({ record, score, reasons });
    }

    scored.sort(
      (a, b) =>
        healthRank(a.record.health) - healthRank(b.record.health) ||
        deprecatedRank(a.record) - deprecatedRank(b.record) ||
        b.score - a.score ||
        compareStrings(a.record.code, b.record.code) ||
        compareStrings(a.record.agentId, b.record.agentId) ||
        compareStrings(a.record.id, b.record.id),
    );
    return scored.slice(0, max).map((entry, index) =>
      create(CapabilityMatchSchema, {
        capability: clone(GovernedCapabilitySchema, entry.record),
        rank: index + 1,
        score: entry.score,
        reasons: entry.reasons,
      }),
    );
  }

  /** The audit trail, oldest first. */
  async listAudit(query: ListAuditQuery = {}): Promise<AuditPage> {
    const size = pageSizeOf(query.pageSize, DEFAULT_AUDIT_PAGE_SIZE, MAX_AUDIT_PAGE_SIZE);
    const after = query.pageToken ? decodeAuditCursor(query.pageToken) : 0;
    const found = await this.storage.listAudit(after, query.capabilityId || undefined, size + 1);
    const page = found.slice(0, size);
    const more = found.length > size;
    return { events: page.map(({ event }) => clone(AuditEventSchema, event)), nextPageToken: more ? encodeToken({ s: page[page.length - 1]!.sequence }) : "" };
  }

  /**
   * Lists what an agent provides: registers or updates each capability (with
   * agent_id set; an empty id defaults to "cap_<agent>_<code>_<version>"),
   * and takes its ACTIVE or DEPRECATED capabilities no longer listed OFFLINE.
   * All or nothing: one refused capability refuses the whole list. Returns
   * the ids in the order given.
   */
  syncAgent(agentId: string, capabilities: readonly GovernedCapability[], actor: string): Promise<string[]> {
    requireAgentId(agentId);
    return this.storage.update((state) => this.applySync(this.batch(state), agentId, capabilities, actor));
  }

  private applySync(batch: Batch, agentId: string, capabilities: readonly GovernedCapability[], actor: string): CatalogueWrites<string[]> {
    const ids: string[] = [];
    for (const capability of capabilities) {
      const input = clone(GovernedCapabilitySchema, capability);
      input.agentId = agentId;
      ids.push(this.stage(batch, input, actor).id);
    }
    const listed = new Set(ids);
    for (const record of batch.all()) {
      if (record.agentId !== agentId || listed.has(record.id) || !isMatchable(record.status)) continue;
      this.changeStatus(batch, record.id, CapabilityStatus.OFFLINE, `no longer provided by agent ${agentId}`, actor);
    }
    return batch.writes(ids);
  }

  /**
   * Sets the health of every capability an agent provides (it follows the
   * agent's lease). Health is not a governed field, so it is not audited.
   * Returns the ids whose health changed.
   */
  setAgentHealth(agentId: string, health: CapabilityHealth, actor: string): Promise<string[]> {
    requireAgentId(agentId); // an empty id would select every static capability
    void actor; // kept for the caller's symmetry with the audited changes; AuditEventKind has no health kind
    return this.storage.update((state) => this.applyHealth(this.batch(state), agentId, health));
  }

  private applyHealth(batch: Batch, agentId: string, health: CapabilityHealth): CatalogueWrites<string[]> {
    const changed: string[] = [];
    for (const record of batch.all()) {
      if (record.agentId !== agentId || record.health === health) continue;
      const edited = batch.edit(record.id);
      edited.health = health;
      edited.updatedAt = batch.timestamp;
      changed.push(record.id);
    }
    return batch.writes(changed.sort(compareStrings));
  }

  /** Takes every capability of an agent OFFLINE (audited). Returns the ids changed. */
  retireAgent(agentId: string, reason: string, actor: string): Promise<string[]> {
    requireAgentId(agentId);
    return this.storage.update((state) => this.applyRetire(this.batch(state), agentId, reason, actor));
  }

  private applyRetire(batch: Batch, agentId: string, reason: string, actor: string): CatalogueWrites<string[]> {
    const changed: string[] = [];
    const sorted = batch.all().sort((a, b) => compareStrings(a.id, b.id));
    for (const record of sorted) {
      if (record.agentId !== agentId || record.status === CapabilityStatus.OFFLINE) continue;
      this.changeStatus(batch, record.id, CapabilityStatus.OFFLINE, reason || `agent ${agentId} retired`, actor);
      changed.push(record.id);
    }
    return batch.writes(changed);
  }

  /** The catalogue entry an agent's task type declares (see capabilityFromTaskType). */
  fromTaskType(agentId: string, taskType: SupportedTaskType): GovernedCapability | undefined {
    return capabilityFromTaskType(agentId, taskType);
  }

  // -------------------------------------------------------------------------

  private batch(state: CatalogueState): Batch {
    return new Batch(state, this.now());
  }

  /** Validates one registration and stages its record and audit events in the batch. */
  private stage(batch: Batch, input: GovernedCapability, actor: string): GovernedCapability {
    checkGovernance(input);
    const record = clone(GovernedCapabilitySchema, input);
    if (record.id.trim() === "") record.id = defaultCapabilityId(record);
    const previous = batch.get(record.id);
    if (previous !== undefined && (previous.code !== record.code || previous.agentId !== record.agentId)) {
      throw governanceError("id_in_use", `capability id ${record.id} belongs to code ${previous.code}${previous.agentId ? ` of agent ${previous.agentId}` : ""}`, {
        id: record.id,
      });
    }
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
  private supersede(batch: Batch, current: GovernedCapability, actor: string): void {
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

  private changeStatus(batch: Batch, id: string, status: CapabilityStatus, reason: string, actor: string): void {
    const record = batch.edit(id);
    if (record.status === status) return;
    batch.audit(AuditEventKind.STATUS_CHANGED, record, actor, statusName(record.status), statusName(status), reason);
    record.status = status;
    record.updatedAt = batch.timestamp;
  }
}

/**
 * The mapping of registry.proto's CapabilityGovernance comment: a task type
 * with governance becomes a CAPABILITY_TYPE_TASK capability (code = task
 * type, version "1.0.0" unless set, ACTIVE). A task type's empty schemas
 * mean "any object" (input) and "unconstrained" (output), so they are listed
 * as exactly those schemas. Undefined when the task type has no governance.
 */
export function capabilityFromTaskType(agentId: string, taskType: SupportedTaskType): GovernedCapability | undefined {
  const governance = taskType.governance;
  if (governance === undefined) return undefined;
  return create(GovernedCapabilitySchema, {
    code: taskType.type,
    name: taskType.name,
    capabilityType: CapabilityType.TASK,
    domain: governance.domain,
    scenarios: [...governance.scenarios],
    intents: [...governance.intents],
    inputSchema: taskType.inputSchema || '{"type":"object"}',
    outputSchema: taskType.outputSchema || "{}",
    permissionRequired: [...governance.permissionRequired],
    riskLevel: governance.riskLevel,
    owner: governance.owner,
    reviewer: governance.reviewer,
    version: governance.version || DEFAULT_TASK_CAPABILITY_VERSION,
    status: CapabilityStatus.ACTIVE,
    requiresConfirmation: governance.requiresConfirmation,
    riskSignals: [...governance.riskSignals],
    agentId,
    taskType: taskType.type,
  });
}

/** "cap_<code>_<version>", or "cap_<agent>_<code>_<version>" for an agent's capability; the version's characters outside [a-z0-9_] become "_". */
export function defaultCapabilityId(capability: Pick<GovernedCapability, "code" | "version" | "agentId">): string {
  const version = capability.version.replace(/[^a-z0-9_]/g, "_");
  return capability.agentId ? `cap_${capability.agentId}_${capability.code}_${version}` : `cap_${capability.code}_${version}`;
}

// ---------------------------------------------------------------------------
// Governance (seed 003 §8)

// One compiler for every check; compiled schemas are removed again so that
// registrations neither accumulate in it nor clash on a reused $id.
const ajv = new Ajv({ allErrors: true, strict: false, addUsedSchema: false });

/**
 * Throws the INVALID_ARGUMENT refusal (details.rule) for the first rule of
 * seed 003 §8 a capability breaks; register runs it, and callers may run it
 * first to leave out a bad entry (it cannot check that an id is in use).
 */
export function checkGovernance(capability: GovernedCapability): void {
  if (blank(capability.code)) throw governanceError("code_required", "a capability needs a code");
  if (blank(capability.version)) throw governanceError("version_required", "a capability needs a version");
  if (capability.capabilityType === CapabilityType.UNSPECIFIED || CapabilityType[capability.capabilityType] === undefined) {
    throw governanceError("capability_type_required", "a capability needs a type: rule, skill, mcp, task, database_query, knowledge_search, report_generator or notification");
  }
  if (blank(capability.owner)) throw governanceError("owner_required", "every capability must have an owner (所有能力必须有 owner)");
  if (capability.riskLevel === RiskLevel.UNSPECIFIED || RiskLevel[capability.riskLevel] === undefined) {
    throw governanceError("risk_level_required", "a capability needs a risk level: low, medium or high");
  }
  if (capability.riskLevel === RiskLevel.HIGH && blank(capability.reviewer)) {
    throw governanceError("high_risk_requires_reviewer", "a high-risk capability must have a reviewer (高风险能力必须有 reviewer)");
  }
  checkSchema("input_schema", capability.inputSchema);
  checkSchema("output_schema", capability.outputSchema);
  if (!isKnownStatus(capability.status)) {
    throw governanceError("status_required", "every capability must have a status (所有能力必须有状态): active, inactive, offline or deprecated");
  }
}

function checkSchema(field: "input_schema" | "output_schema", text: string): void {
  if (blank(text)) {
    throw governanceError(`${field}_required`, `every capability must have an ${field.replace("_", " ")} (所有能力必须有输入输出 schema)`, { schema: field });
  }
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch (error) {
    throw governanceError("schema_invalid", `${field} is not JSON: ${messageOf(error)}`, { schema: field, error: messageOf(error) });
  }
  if (typeof schema !== "boolean" && (typeof schema !== "object" || schema === null || Array.isArray(schema))) {
    throw governanceError("schema_invalid", `${field} must be a JSON Schema object or boolean`, { schema: field, error: "not an object or boolean" });
  }
  try {
    ajv.compile(schema);
  } catch (error) {
    throw governanceError("schema_invalid", `${field} is not a valid JSON Schema: ${messageOf(error)}`, { schema: field, error: messageOf(error) });
  } finally {
    // Not when it has an $id: removeSchema would also drop a registered schema of that id (the meta-schema, say).
    if (typeof schema === "object" && !("$id" in schema)) ajv.removeSchema(schema);
  }
}

function governanceError(rule: string, message: string, more: JsonObject = {}) {
  return protocolError(ErrorCode.INVALID_PARAMS, message, { details: { rule, ...more } });
}

function notFound(id: string) {
  return protocolError(ErrorCode.INVALID_PARAMS, `no capability ${id}`, { status: Code.NotFound, details: { id } });
}

function requireAgentId(agentId: string): void {
  if (blank(agentId)) throw protocolError(ErrorCode.INVALID_PARAMS, "agent_id is required", { details: { field: "agent_id" } });
}

// ---------------------------------------------------------------------------
// The staged changes of one operation

class Batch {
  private readonly staged = new Map<string, GovernedCapability>();
  private readonly events: AuditEvent[] = [];

  constructor(
    private readonly storage: CatalogueState,
    private readonly nowMs: number,
  ) {}

  /** The operation's time; a fresh message each time, so no two records share one. */
  get timestamp(): Timestamp {
    return timestampFromMs(this.nowMs);
  }

  get(id: string): GovernedCapability | undefined {
    return this.staged.get(id) ?? this.storage.getCapability(id);
  }

  /** A staged copy of a record to change; the stored one stays untouched until commit. */
  edit(id: string): GovernedCapability {
    const staged = this.staged.get(id);
    if (staged !== undefined) return staged;
    const stored = this.storage.getCapability(id);
    if (stored === undefined) throw new Error(`no capability ${id} to edit`);
    const copy = clone(GovernedCapabilitySchema, stored);
    this.staged.set(id, copy);
    return copy;
  }

  put(record: GovernedCapability): void {
    this.staged.set(record.id, record);
  }

  /** Every record as it will be after commit. */
  all(): GovernedCapability[] {
    const out = [...this.storage.capabilities()].map((record) => this.staged.get(record.id) ?? record);
    for (const record of this.staged.values()) if (this.storage.getCapability(record.id) === undefined) out.push(record);
    return out;
  }

  audit(kind: AuditEventKind, capability: GovernedCapability, actor: string, from: string, to: string, reason: string): void {
    const sequence = this.storage.lastAuditSequence() + this.events.length + 1;
    this.events.push(
      create(AuditEventSchema, {
        id: `audit-${String(sequence).padStart(6, "0")}`,
        kind,
        capabilityId: capability.id,
        capabilityCode: capability.code,
        actor,
        at: this.timestamp,
        from,
        to,
        reason,
      }),
    );
  }

  /** What the operation writes, with its result, for CatalogueStorage.update to commit. */
  writes<T>(result: T): CatalogueWrites<T> {
    return { result, capabilities: [...this.staged.values()], events: this.events };
  }
}

// ---------------------------------------------------------------------------
// Matching helpers

const NEXT_STEPS: Record<string, CapabilityType> = {
  run_rule: CapabilityType.RULE,
  use_skill: CapabilityType.SKILL,
  call_mcp: CapabilityType.MCP,
  run_task: CapabilityType.TASK,
  query_database: CapabilityType.DATABASE_QUERY,
  search_knowledge: CapabilityType.KNOWLEDGE_SEARCH,
  generate_report: CapabilityType.REPORT_GENERATOR,
  notify: CapabilityType.NOTIFICATION,
};

/** run_rule, …, or a type name ("rule", "RULE", "CAPABILITY_TYPE_RULE"); anything else is refused. */
function typeOfNextStep(nextStep: string): CapabilityType {
  const key = nextStep.trim().toLowerCase();
  const mapped = NEXT_STEPS[key];
  if (mapped !== undefined) return mapped;
  const name = key.toUpperCase().replace(/^CAPABILITY_TYPE_/, "");
  const byName = (CapabilityType as unknown as Record<string, CapabilityType | string | undefined>)[name];
  if (typeof byName === "number" && byName !== CapabilityType.UNSPECIFIED) return byName;
  throw protocolError(ErrorCode.INVALID_PARAMS, `unknown next_step ${nextStep}: use ${Object.keys(NEXT_STEPS).join(", ")} or a capability type`, {
    details: { field: "next_step", value: nextStep },
  });
}

/** Steps 7 and 8: per lineage, the ACTIVE version, else the newest DEPRECATED one. */
function currentVersions(records: Iterable<GovernedCapability>): GovernedCapability[] {
  const best = new Map<string, GovernedCapability>();
  for (const record of records) {
    if (!isMatchable(record.status)) continue;
    const key = lineageKey(record);
    const held = best.get(key);
    if (held === undefined || preferAsCurrent(record, held)) best.set(key, record);
  }
  return [...best.values()];
}

/** ACTIVE beats DEPRECATED; between equals, the newer version (then the larger id, to be deterministic). */
function preferAsCurrent(candidate: GovernedCapability, held: GovernedCapability): boolean {
  const candidateActive = candidate.status === CapabilityStatus.ACTIVE;
  const heldActive = held.status === CapabilityStatus.ACTIVE;
  if (candidateActive !== heldActive) return candidateActive;
  return (compareVersions(candidate.version, held.version) || compareStrings(candidate.id, held.id)) > 0;
}

function isMatchable(status: CapabilityStatus): boolean {
  return status === CapabilityStatus.ACTIVE || status === CapabilityStatus.DEPRECATED;
}

function healthRank(health: CapabilityHealth): number {
  switch (health) {
    case CapabilityHealth.DEGRADED:
      return 1;
    case CapabilityHealth.UNHEALTHY:
      return 2;
    default:
      return 0;
  }
}

function deprecatedRank(record: GovernedCapability): number {
  return record.status === CapabilityStatus.DEPRECATED ? 1 : 0;
}

function lineageKey(record: GovernedCapability): string {
  return `${record.agentId}\u0000${record.code}`;
}

function sameLineage(a: GovernedCapability, b: GovernedCapability): boolean {
  return a.code === b.code && a.agentId === b.agentId;
}

// ---------------------------------------------------------------------------
// Ordering, paging, names

/**
 * Versions in natural order: a leading "v" is ignored, digit runs compare
 * as numbers (v1.9 < v1.10), and a pre-release suffix sorts first
 * (1.0.0-beta < 1.0.0). Equal-looking versions fall back to plain text order.
 */
export function compareVersions(a: string, b: string): number {
  const left = versionTokens(a);
  const right = versionTokens(b);
  const common = Math.min(left.length, right.length);
  for (let i = 0; i < common; i++) {
    const x = left[i]!;
    const y = right[i]!;
    if (x === y) continue;
    const xNumber = /^\d+$/.test(x);
    const yNumber = /^\d+$/.test(y);
    if (xNumber && yNumber) return compareDigits(x, y);
    // 1.0.0-beta against 1.0.0.1: the pre-release is older.
    if (x.startsWith("-") !== y.startsWith("-")) return x.startsWith("-") ? -1 : 1;
    return compareStrings(x, y);
  }
  if (left.length !== right.length) {
    const longerIsLeft = left.length > right.length;
    const extra = (longerIsLeft ? left : right)[common]!;
    const longerIsNewer = !extra.startsWith("-");
    return longerIsLeft === longerIsNewer ? 1 : -1;
  }
  return compareStrings(a, b);
}

function versionTokens(version: string): string[] {
  return version.trim().toLowerCase().replace(/^v/, "").match(/\d+|\D+/g) ?? [];
}

function compareDigits(a: string, b: string): number {
  const x = a.replace(/^0+(?=\d)/, "");
  const y = b.replace(/^0+(?=\d)/, "");
  return x.length - y.length || compareStrings(x, y);
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

interface ListKey {
  c: string;
  v: string;
  a: string;
  i: string;
}

function listKey(record: GovernedCapability): ListKey {
  return { c: record.code, v: record.version, a: record.agentId, i: record.id };
}

function compareListKeys(x: ListKey, y: ListKey): number {
  return compareStrings(x.c, y.c) || compareVersions(x.v, y.v) || compareStrings(x.a, y.a) || compareStrings(x.i, y.i);
}

function encodeToken(cursor: object): string {
  return Buffer.from(JSON.stringify(cursor)).toString("base64url");
}

function decodeToken(token: string): unknown {
  try {
    return JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

function decodeListCursor(token: string): ListKey {
  const value = decodeToken(token);
  if (typeof value === "object" && value !== null) {
    const { c, v, a, i } = value as Record<string, unknown>;
    if (typeof c === "string" && typeof v === "string" && typeof a === "string" && typeof i === "string") return { c, v, a, i };
  }
  throw badToken();
}

function decodeAuditCursor(token: string): number {
  const value = decodeToken(token);
  if (typeof value === "object" && value !== null) {
    const { s } = value as Record<string, unknown>;
    if (typeof s === "number" && Number.isSafeInteger(s) && s >= 0) return s;
  }
  throw badToken();
}

function badToken() {
  return protocolError(ErrorCode.INVALID_PARAMS, "page_token is not one this registry issued", { details: { field: "page_token" } });
}

function pageSizeOf(requested: number | undefined, fallback: number, max: number): number {
  const size = requested ?? 0;
  if (!Number.isInteger(size) || size < 0) {
    throw protocolError(ErrorCode.INVALID_PARAMS, "page_size must be a non-negative integer", { details: { field: "page_size" } });
  }
  return Math.min(size === 0 ? fallback : size, max);
}

function isKnownStatus(status: CapabilityStatus): boolean {
  return status !== CapabilityStatus.UNSPECIFIED && CapabilityStatus[status] !== undefined;
}

/** The enum value's full name, "CAPABILITY_STATUS_ACTIVE", as audit events record it. */
function statusName(status: CapabilityStatus): string {
  const name = CapabilityStatus[status] as string | undefined;
  return name === undefined ? String(status) : `CAPABILITY_STATUS_${name}`;
}

function statusLabel(status: CapabilityStatus): string {
  return (CapabilityStatus[status] as string | undefined)?.toLowerCase() ?? String(status);
}

function typeLabel(type: CapabilityType): string {
  return (CapabilityType[type] as string | undefined)?.toLowerCase() ?? String(type);
}

function healthLabel(health: CapabilityHealth): string {
  return (CapabilityHealth[health] as string | undefined)?.toLowerCase() ?? String(health);
}

function normal(text: string): string {
  return text.trim().toLowerCase();
}

function blank(text: string): boolean {
  return text.trim() === "";
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
