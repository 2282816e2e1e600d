// The governance rules of seed 003 §8 that every capability must keep, and
// the names the catalogue gives statuses in its audit trail.
import type { JsonObject } from "@bufbuild/protobuf";
import { Ajv } from "ajv";
import { RiskLevel } from "../../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { CapabilityStatus, CapabilityType, type GovernedCapability } from "../../gen/synapse/v1/registry_pb.js";
import { protocolError } from "../protocol/errors.js";

// One compiler for many checks; compiled schemas are removed again so that
// registrations do not clash on a reused $id. Ajv's code-generation scope
// keeps a name and value for every schema it ever compiled, removed or not
// (some 80 KB per registration of a few task types), so the compiler is
// replaced after a number of compiles: a flood of registrations must not
// grow the registry's heap.
const COMPILES_PER_COMPILER = 256;
let ajv = newCompiler();
let compiles = 0;

function newCompiler(): Ajv {
  return new Ajv({ allErrors: true, strict: false, addUsedSchema: false });
}

function compiler(): Ajv {
  if (++compiles > COMPILES_PER_COMPILER) {
    ajv = newCompiler();
    compiles = 1;
  }
  return ajv;
}

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
  const checking = compiler();
  try {
    checking.compile(schema);
  } catch (error) {
    throw governanceError("schema_invalid", `${field} is not a valid JSON Schema: ${messageOf(error)}`, { schema: field, error: messageOf(error) });
  } finally {
    // Not when it has an $id: removeSchema would also drop a registered schema of that id (the meta-schema, say).
    if (typeof schema === "object" && !("$id" in schema)) checking.removeSchema(schema);
  }
}

export function governanceError(rule: string, message: string, more: JsonObject = {}) {
  return protocolError(ErrorCode.INVALID_PARAMS, message, { details: { rule, ...more } });
}

export function isKnownStatus(status: CapabilityStatus): boolean {
  return status !== CapabilityStatus.UNSPECIFIED && CapabilityStatus[status] !== undefined;
}

/** The enum value's full name, "CAPABILITY_STATUS_ACTIVE", as audit events record it. */
export function statusName(status: CapabilityStatus): string {
  const name = CapabilityStatus[status] as string | undefined;
  return name === undefined ? String(status) : `CAPABILITY_STATUS_${name}`;
}


export function blank(text: string): boolean {
  return text.trim() === "";
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
