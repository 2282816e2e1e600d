// The console's group log (src/console/group-log.ts), in Node: events the
// host seals as its group log does (a2n:group_event, addressed to the
// group, numbered) verify and hand back their payload; another group's
// event, a tampered one, a gap and another signer are marked, and a
// repeated event (a resumed stream) is ignored.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { GroupEventKind, GroupEventPayloadSchema } from "../gen/synapse/v1/a2n_pb.js";
import { EnvelopeSchema, MessageType, type Envelope } from "../gen/synapse/v1/envelope_pb.js";
import type { Executor } from "../src/console/envelopes.js";
import { groupEventSummary } from "../src/console/group-format.js";
import { GroupLog } from "../src/console/group-log.js";
import { generateKey, type AgentKey } from "../src/crypto/keys.js";
import { seal } from "../src/envelope/seal.js";

const hostKey = generateKey();
const host: Executor = { agentId: "agent_host", systemId: "synapse", keyId: hostKey.keyId, publicKey: hostKey.publicKey };
const GROUP = "team";

function event(sequence: bigint, kind: GroupEventKind, options: { group?: string; key?: AgentKey; subjectId?: string } = {}): Envelope {
  const payload = create(GroupEventPayloadSchema, { groupId: options.group ?? GROUP, kind, subjectId: options.subjectId ?? "" });
  const key = options.key ?? hostKey;
  return seal({ messageType: MessageType.A2N_GROUP_EVENT, payload, sender: { agentId: host.agentId, keyId: key.keyId }, receiver: { agentId: options.group ?? GROUP }, sequence }, key).envelope;
}

describe("console group log", () => {
  it("verifies the host's events in order, hands back what they say, and ignores a repeated one", () => {
    const log = new GroupLog(host, GROUP);
    const first = log.add(1n, event(1n, GroupEventKind.GROUP_CREATED));
    expect(first?.entry.problem).toBeUndefined();
    const second = log.add(2n, event(2n, GroupEventKind.VOTE_STARTED, { subjectId: "ship" }));
    expect(second?.payload?.kind).toBe(GroupEventKind.VOTE_STARTED);
    expect(groupEventSummary(second!.payload!)).toBe("vote started · ship");
    expect(log.add(2n, event(2n, GroupEventKind.VOTE_STARTED, { subjectId: "ship" }))).toBeUndefined();
    expect(log.nextSequence).toBe(3n);
    expect(log.allVerified).toBe(true);
  });

  it("marks another group's event, a tampered one, another signer and a gap, and acts on none of them", () => {
    const other = new GroupLog(host, GROUP);
    expect(other.add(1n, event(1n, GroupEventKind.GROUP_CREATED, { group: "elsewhere" }))?.entry.problem).toBe("addressed to elsewhere, not team");

    const log = new GroupLog(host, GROUP);
    const original = event(1n, GroupEventKind.GROUP_CREATED);
    const tampered = create(EnvelopeSchema, { ...original, payload: Uint8Array.from(original.payload, (byte, i) => (i === 0 ? byte ^ 1 : byte)) });
    const bad = log.add(1n, tampered);
    expect(bad?.entry.problem).toBe("signature does not verify");
    expect(bad?.payload).toBeUndefined();
    expect(log.allVerified).toBe(false);

    const stranger = new GroupLog(host, GROUP);
    expect(stranger.add(1n, event(1n, GroupEventKind.GROUP_CREATED, { key: generateKey() }))?.entry.problem).toMatch(/^signed with key/);

    const gap = new GroupLog(host, GROUP);
    gap.add(1n, event(1n, GroupEventKind.GROUP_CREATED));
    const skipped = gap.add(3n, event(3n, GroupEventKind.MEMBER_INVITED));
    expect(skipped?.entry.problem).toBe("arrived where 2 was due");
    expect(skipped?.payload).toBeUndefined();
    expect(gap.broken?.sequence).toBe(3n);
  });
});
