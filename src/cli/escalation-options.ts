// `synapse serve --escalate-after DURATION --escalation-contact LEVEL=AGENT_ID`:
// the escalation policy the reference agent declares on its task types.
// Level 1 is the requester's; each further level is named contacts'; each
// level waits DURATION.
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { EscalationPolicySchema, type EscalationPolicy } from "../../gen/synapse/v1/capabilities_pb.js";
import { MAX_ESCALATION_LEVEL } from "../agent/escalation.js";
import { UsageError } from "./args.js";

/** The policy the flags describe, or undefined when none is given. */
export function escalationPolicy(afterMs: number | undefined, contacts: readonly string[] | undefined, usage: string): EscalationPolicy | undefined {
  const byLevel = new Map<number, string[]>();
  for (const contact of contacts ?? []) {
    const match = /^([2-9])=(\S+)$/.exec(contact);
    const level = Number(match?.[1]);
    if (match === null || level > MAX_ESCALATION_LEVEL) {
      throw new UsageError(`--escalation-contact takes LEVEL=AGENT_ID with LEVEL 2 or 3, got ${JSON.stringify(contact)}\n\n${usage}`);
    }
    byLevel.set(level, [...(byLevel.get(level) ?? []), match[2]!]);
  }
  if (afterMs === undefined) {
    if (byLevel.size > 0) throw new UsageError(`--escalation-contact needs --escalate-after\n\n${usage}`);
    return undefined;
  }
  if (afterMs <= 0) throw new UsageError(`--escalate-after must be longer than 0\n\n${usage}`);
  const levels = [{ requester: true, agentIds: [] as string[], timeout: durationFromMs(afterMs) }];
  for (let level = 2; level <= MAX_ESCALATION_LEVEL; level++) {
    const agentIds = byLevel.get(level);
    if (agentIds === undefined) {
      if ([...byLevel.keys()].some((later) => later > level)) throw new UsageError(`--escalation-contact names level ${level + 1} but no contact for level ${level}\n\n${usage}`);
      break;
    }
    levels.push({ requester: false, agentIds, timeout: durationFromMs(afterMs) });
  }
  return create(EscalationPolicySchema, { levels });
}
