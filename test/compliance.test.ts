// evaluateCompliance against seed 000 §5.4 and the §6.1 table (8 basic,
// 5 complete, 5 advanced), and the ordering of compliance levels.
import { describe, expect, it } from "vitest";
import { Compliance } from "../gen/synapse/v1/capabilities_pb.js";
import { complianceAtLeast, evaluateCompliance } from "../src/capabilities/compliance.js";
import { STANDARD_INTERFACES } from "../src/capabilities/interfaces.js";

// The table's order, as §6.1 lists it.
const BASIC = ["AgentIdentity", "MessageHandler", "CapabilitiesProvider", "P2PTaskHandler", "CallbackReceiver", "HTTPTransport", "Authenticator", "IdempotencyHandler"];
const COMPLETE = ["CallbackSender", "TaskStatusProvider", "HILHandler", "MultipartTransport", "HybridTransport"];
const ADVANCED = ["GroupTaskHandler", "GroupManager", "VotingHandler", "EscalationHandler", "StreamingTransport"];

describe("evaluateCompliance", () => {
  it("counts 8 basic, 5 complete and 5 advanced interfaces, as §6.1 lists them", () => {
    const { evaluation } = evaluateCompliance([]);
    expect(evaluation.basicRequired).toBe(8);
    expect(evaluation.completeTotal).toBe(5);
    expect(evaluation.advancedTotal).toBe(5);
    expect(STANDARD_INTERFACES).toHaveLength(18);
  });

  it("an empty list implements nothing and misses every basic interface, in table order", () => {
    const { evaluation, level, unknown } = evaluateCompliance([], "agent_x");
    expect(evaluation.agentId).toBe("agent_x");
    expect(evaluation.basicImplemented).toBe(0);
    expect(evaluation.completeImplemented).toBe(0);
    expect(evaluation.advancedImplemented).toBe(0);
    expect(evaluation.compliant).toBe(false);
    expect(evaluation.missingBasics).toEqual(BASIC);
    expect(level).toBe(Compliance.UNSPECIFIED);
    expect(unknown).toEqual([]);
  });

  it("leaves agent_id empty for a bare list", () => {
    expect(evaluateCompliance(BASIC).evaluation.agentId).toBe("");
  });

  it("all basic interfaces are compliant at BASIC", () => {
    const { evaluation, level } = evaluateCompliance([...BASIC].reverse());
    expect(evaluation.basicImplemented).toBe(8);
    expect(evaluation.compliant).toBe(true);
    expect(evaluation.missingBasics).toEqual([]);
    expect(level).toBe(Compliance.BASIC);
  });

  it.each(BASIC)("missing only %s is not compliant and names it", (missing) => {
    const { evaluation, level } = evaluateCompliance([...BASIC, ...COMPLETE, ...ADVANCED].filter((name) => name !== missing));
    expect(evaluation.basicImplemented).toBe(7);
    expect(evaluation.completeImplemented).toBe(5);
    expect(evaluation.advancedImplemented).toBe(5);
    expect(evaluation.compliant).toBe(false);
    expect(evaluation.missingBasics).toEqual([missing]);
    expect(level).toBe(Compliance.UNSPECIFIED);
  });

  it("every basic and complete interface is COMPLETE", () => {
    const { evaluation, level } = evaluateCompliance([...COMPLETE, ...BASIC, "StreamingTransport"]);
    expect(evaluation.completeImplemented).toBe(5);
    expect(evaluation.advancedImplemented).toBe(1);
    expect(level).toBe(Compliance.COMPLETE);
  });

  it("all but one complete interface stays BASIC", () => {
    const { evaluation, level } = evaluateCompliance([...BASIC, ...COMPLETE.slice(1), ...ADVANCED]);
    expect(evaluation.completeImplemented).toBe(4);
    expect(evaluation.advancedImplemented).toBe(5);
    expect(level).toBe(Compliance.BASIC);
  });

  it("all 18 are ADVANCED", () => {
    const { evaluation, level } = evaluateCompliance(STANDARD_INTERFACES.map((entry) => entry.name));
    expect(evaluation).toMatchObject({ basicImplemented: 8, completeImplemented: 5, advancedImplemented: 5, compliant: true, missingBasics: [] });
    expect(level).toBe(Compliance.ADVANCED);
  });

  it("advanced interfaces without the basics count but do not make the agent compliant", () => {
    const { evaluation, level } = evaluateCompliance(ADVANCED);
    expect(evaluation.advancedImplemented).toBe(5);
    expect(evaluation.compliant).toBe(false);
    expect(level).toBe(Compliance.UNSPECIFIED);
  });

  it("counts duplicates once", () => {
    const { evaluation, level } = evaluateCompliance([...BASIC, ...BASIC, "HILHandler", "HILHandler", "VotingHandler", "VotingHandler"]);
    expect(evaluation.basicImplemented).toBe(8);
    expect(evaluation.completeImplemented).toBe(1);
    expect(evaluation.advancedImplemented).toBe(1);
    expect(level).toBe(Compliance.BASIC);
  });

  it("reports names that are not standard interfaces and counts them for nothing", () => {
    const { evaluation, unknown, level } = evaluateCompliance([
      ...BASIC.slice(1),
      "agentidentity", // names are exact: case matters
      "Telepathy",
      "Telepathy",
      "",
    ]);
    expect(unknown).toEqual(["agentidentity", "Telepathy", ""]);
    expect(evaluation.basicImplemented).toBe(7);
    expect(evaluation.missingBasics).toEqual(["AgentIdentity"]);
    expect(level).toBe(Compliance.UNSPECIFIED);
  });
});

describe("complianceAtLeast", () => {
  const levels = [Compliance.UNSPECIFIED, Compliance.BASIC, Compliance.COMPLETE, Compliance.ADVANCED];

  it("orders UNSPECIFIED < BASIC < COMPLETE < ADVANCED", () => {
    for (const [i, level] of levels.entries()) {
      for (const [j, minimum] of levels.entries()) {
        expect(complianceAtLeast(level, minimum)).toBe(i >= j);
      }
    }
  });

  it("an UNSPECIFIED minimum is met by anything, and UNSPECIFIED meets nothing higher", () => {
    expect(complianceAtLeast(Compliance.UNSPECIFIED, Compliance.UNSPECIFIED)).toBe(true);
    expect(complianceAtLeast(Compliance.UNSPECIFIED, Compliance.BASIC)).toBe(false);
  });
});
