// What agents declare of the 18 standard interfaces. The reference agent as
// `synapse serve` runs it hosts groups and declares all 18 (ADVANCED); an
// agent served without a group host declares the 15 others (COMPLETE).
import { Compliance } from "../../gen/synapse/v1/capabilities_pb.js";
import { STANDARD_INTERFACES } from "../../src/capabilities/interfaces.js";

export const GROUP_INTERFACES: readonly string[] = ["GroupTaskHandler", "GroupManager", "VotingHandler"];

/** What `synapse serve` declares, in the standard table's order: every one. */
export const SERVED_INTERFACES: readonly string[] = STANDARD_INTERFACES.map((entry) => entry.name);
export const SERVED_LEVEL = Compliance.ADVANCED;

/** What an agent without a group host declares. */
export const UNGROUPED_INTERFACES: readonly string[] = SERVED_INTERFACES.filter((name) => !GROUP_INTERFACES.includes(name));
export const UNGROUPED_LEVEL = Compliance.COMPLETE;
