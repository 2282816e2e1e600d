// Compliance evaluation of seed 000 §5.4: how many of the 18 standard
// interfaces (seed 000 §6.1: 8 basic, 5 complete, 5 advanced) a set of
// interface names covers, whether every basic one is there (a registry
// refuses an agent that misses one), and the highest level fully covered.
import { create } from "@bufbuild/protobuf";
import { Compliance, ComplianceEvaluationSchema, type ComplianceEvaluation } from "../../gen/synapse/v1/capabilities_pb.js";
import { STANDARD_INTERFACES, standardInterface } from "./interfaces.js";

export interface ComplianceResult {
  evaluation: ComplianceEvaluation;
  /** ADVANCED: all 18; COMPLETE: every basic and complete one; BASIC: every basic one; else UNSPECIFIED. */
  level: Compliance;
  /** Names given that are not standard interfaces, first occurrence order, each once; they count for nothing. */
  unknown: string[];
}

/** How many standard interfaces each level has (from the table, so it cannot drift from it). */
function totalOf(level: Compliance): number {
  return STANDARD_INTERFACES.filter((entry) => entry.level === level).length;
}

export function evaluateCompliance(interfaceNames: readonly string[], agentId = ""): ComplianceResult {
  const implemented = new Set<string>();
  const unknown: string[] = [];
  for (const name of interfaceNames) {
    if (standardInterface(name) !== undefined) implemented.add(name);
    else if (!unknown.includes(name)) unknown.push(name);
  }

  // Counting over the table (not over the input) is what makes duplicates count once.
  const implementedAt = (level: Compliance) => STANDARD_INTERFACES.filter((entry) => entry.level === level && implemented.has(entry.name)).length;
  const missingBasics = STANDARD_INTERFACES.filter((entry) => entry.level === Compliance.BASIC && !implemented.has(entry.name)).map((entry) => entry.name);

  const evaluation = create(ComplianceEvaluationSchema, {
    agentId,
    basicImplemented: implementedAt(Compliance.BASIC),
    basicRequired: totalOf(Compliance.BASIC),
    completeImplemented: implementedAt(Compliance.COMPLETE),
    completeTotal: totalOf(Compliance.COMPLETE),
    advancedImplemented: implementedAt(Compliance.ADVANCED),
    advancedTotal: totalOf(Compliance.ADVANCED),
    compliant: missingBasics.length === 0,
    missingBasics,
  });
  return { evaluation, level: levelOf(evaluation), unknown };
}

function levelOf(evaluation: ComplianceEvaluation): Compliance {
  if (!evaluation.compliant) return Compliance.UNSPECIFIED;
  if (evaluation.completeImplemented < evaluation.completeTotal) return Compliance.BASIC;
  if (evaluation.advancedImplemented < evaluation.advancedTotal) return Compliance.COMPLETE;
  return Compliance.ADVANCED;
}

/**
 * Whether `level` meets `minimum` (UNSPECIFIED < BASIC < COMPLETE < ADVANCED).
 * An UNSPECIFIED minimum asks for nothing, so every level meets it.
 */
export function complianceAtLeast(level: Compliance, minimum: Compliance): boolean {
  return rank(level) >= rank(minimum);
}

function rank(level: Compliance): number {
  switch (level) {
    case Compliance.BASIC:
      return 1;
    case Compliance.COMPLETE:
      return 2;
    case Compliance.ADVANCED:
      return 3;
    default:
      return 0;
  }
}
