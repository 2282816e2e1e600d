// What the reference agent declares of the 18 standard interfaces: every
// one once the group work wires `groups`, until then all but the three
// group interfaces. Tests that check declarations and compliance levels
// take their expectations from here, so that with groups wired they demand
// all 18 and the top level.
import { Compliance } from "../../gen/synapse/v1/capabilities_pb.js";
import { AGENT_WIRING } from "../../src/agent/agent.js";
import { STANDARD_INTERFACES, type Wiring } from "../../src/capabilities/interfaces.js";

export const GROUP_INTERFACES: readonly string[] = ["GroupTaskHandler", "GroupManager", "VotingHandler"];

/** Whether this build wires the group interfaces (a `groups` flag in the agent's wiring). */
export const groupsWired = (AGENT_WIRING as Wiring & { groups?: boolean }).groups === true;

/** The interfaces the reference agent declares, in the standard table's order. */
export const AGENT_INTERFACES: readonly string[] = STANDARD_INTERFACES.map((entry) => entry.name).filter((name) => groupsWired || !GROUP_INTERFACES.includes(name));

/** The compliance level EvaluateCompliance gives the reference agent. */
export const AGENT_LEVEL: Compliance = groupsWired ? Compliance.ADVANCED : Compliance.COMPLETE;
