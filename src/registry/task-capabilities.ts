// How an agent's task type becomes a catalogue entry, and the ids the
// catalogue gives entries registered without one.
import { create } from "@bufbuild/protobuf";
import type { SupportedTaskType } from "../../gen/synapse/v1/capabilities_pb.js";
import { CapabilityStatus, CapabilityType, GovernedCapabilitySchema, type GovernedCapability } from "../../gen/synapse/v1/registry_pb.js";

export const DEFAULT_TASK_CAPABILITY_VERSION = "1.0.0";

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
