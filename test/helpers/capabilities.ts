// A governed capability the registry accepts, for tests that register one:
// the fields a test does not care about filled in, `init` on top.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { RiskLevel } from "../../gen/synapse/v1/capabilities_pb.js";
import { CapabilityStatus, CapabilityType, type GovernedCapabilitySchema } from "../../gen/synapse/v1/registry_pb.js";

export type CapabilityInit = MessageInitShape<typeof GovernedCapabilitySchema>;

export function governedCapability(init: CapabilityInit): CapabilityInit {
  return {
    name: "A capability",
    capabilityType: CapabilityType.SKILL,
    domain: "reimbursement",
    intents: ["explain"],
    inputSchema: '{"type":"object"}',
    outputSchema: '{"type":"object"}',
    riskLevel: RiskLevel.LOW,
    owner: "财务风控组",
    version: "v1",
    status: CapabilityStatus.ACTIVE,
    ...init,
  };
}
