// Matching an Ontology to ranked candidates: seed 003 §4, §5, with the
// health degradation of §7.
//
// Matching, as implemented here (seed 003 §5 lists 8 steps without saying
// which filter and which rank):
//   Steps 6-8 are filters. 6: permission_required must be a subset of the
//   permissions the caller holds (granted by the registry; see grants.ts).
//   7: status must be ACTIVE or DEPRECATED (INACTIVE and OFFLINE are never
//   matched: "下线能力不能被 Orchestrator 调用").
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
import { clone, create } from "@bufbuild/protobuf";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  CapabilityHealth,
  CapabilityMatchSchema,
  CapabilityStatus,
  CapabilityType,
  GovernedCapabilitySchema,
  type CapabilityMatch,
  type GovernedCapability,
  type Ontology,
} from "../../gen/synapse/v1/registry_pb.js";
import { protocolError } from "../protocol/errors.js";
import { compareStrings, compareVersions } from "./catalogue-order.js";

export const DEFAULT_MATCH_LIMIT = 20;
const MAX_MATCH_LIMIT = 500;

// Score weights (see the header): each step owns its own decimal digits.
const SCORE_TYPE = 100_000;
const SCORE_SCENARIO = 10_000;
const SCORE_RISK_SIGNAL = 100;
const MAX_COUNTED_SIGNALS = 99;
const SCORE_INTENT = 10;
const SCORE_EXACT_DOMAIN = 1;

/**
 * The candidates among `records` for an ontology and the permissions held,
 * best first. An unrecognised next_step is INVALID_ARGUMENT.
 */
export function rankCandidates(records: Iterable<GovernedCapability>, ontology: Ontology, permissions: readonly string[], limit = DEFAULT_MATCH_LIMIT): CapabilityMatch[] {
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
  for (const record of currentVersions(records)) {
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
export function currentVersions(records: Iterable<GovernedCapability>): GovernedCapability[] {
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

export function isMatchable(status: CapabilityStatus): boolean {
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

export function sameLineage(a: GovernedCapability, b: GovernedCapability): boolean {
  return a.code === b.code && a.agentId === b.agentId;
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

