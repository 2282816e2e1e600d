// The console's event log (src/console/event-log.ts), in Node: events sealed
// by the server's own seal() are verified and replayed through the state
// machine into the path the console draws; an event that does not verify,
// an illegal step or a gap breaks the path there, and a repeated event (a
// resumed stream) is ignored.
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { EnvelopeSchema, MessageType, type Envelope } from "../gen/synapse/v1/envelope_pb.js";
import {
  TaskAckPayloadSchema,
  TaskCompletePayloadSchema,
  TaskConfirmPayloadSchema,
  TaskNeedInfoPayloadSchema,
  TaskState,
  TaskStatusUpdatePayloadSchema,
} from "../gen/synapse/v1/payloads_pb.js";
import type { Executor } from "../src/console/envelopes.js";
import { EventLog } from "../src/console/event-log.js";
import { generateKey } from "../src/crypto/keys.js";
import { seal } from "../src/envelope/seal.js";

const executorKey = generateKey();
const executor: Executor = { agentId: "agent_exec", systemId: "synapse", keyId: executorKey.keyId, publicKey: executorKey.publicKey };
const REQUESTER = "agent_requester";
const TASK = "t-log";

function event<Desc extends DescMessage>(sequence: bigint, messageType: MessageType, payload: MessageShape<Desc>): Envelope {
  return seal({ messageType, payload, sender: { agentId: executor.agentId }, receiver: { agentId: REQUESTER }, taskId: TASK, sequence }, executorKey).envelope;
}

const confirm = (sequence: bigint) => event(sequence, MessageType.TASK_CONFIRM, create(TaskConfirmPayloadSchema, { taskId: TASK, confirmed: true }));
const progress = (sequence: bigint) => event(sequence, MessageType.TASK_STATUS_UPDATE, create(TaskStatusUpdatePayloadSchema, { taskId: TASK, progress: 50 }));
const complete = (sequence: bigint) => event(sequence, MessageType.TASK_COMPLETE, create(TaskCompletePayloadSchema, { taskId: TASK, summary: "done" }));
const states = (log: EventLog) => log.path.map((step) => TaskState[step.state]);

describe("console event log", () => {
  it("replays verified events into the path, with each step's event, and ignores a repeated one", () => {
    const log = new EventLog(executor, REQUESTER, TASK);
    const needInfo = event(1n, MessageType.TASK_NEED_INFO, create(TaskNeedInfoPayloadSchema, { taskId: TASK, question: "how many?" }));
    // The requester's answer, acknowledged by the executor: info_needed -> info_provided.
    const ack = event(2n, MessageType.TASK_ACK, create(TaskAckPayloadSchema, { taskId: TASK, acknowledgedType: MessageType.TASK_INFO_PROVIDED, state: TaskState.INFO_PROVIDED }));
    for (const [sequence, envelope] of [[1n, needInfo], [2n, ack], [3n, confirm(3n)], [4n, progress(4n)], [5n, progress(5n)], [6n, complete(6n)]] as const) {
      expect(log.add(sequence, envelope)?.problem).toBeUndefined();
    }
    expect(log.add(6n, complete(6n))).toBeUndefined();
    expect(states(log)).toEqual(["IDLE", "PENDING", "INFO_NEEDED", "INFO_PROVIDED", "CONFIRMED", "EXECUTING", "COMPLETED"]);
    expect(log.path.map((step) => step.sequence)).toEqual([0n, 0n, 1n, 2n, 3n, 4n, 6n]);
    expect(log.entries).toHaveLength(6);
    expect(log.allVerified).toBe(true);
    expect(log.finished).toBe(true);
  });

  it("stops the path at an event that does not verify, and places nothing after it", () => {
    const log = new EventLog(executor, REQUESTER, TASK);
    log.add(1n, confirm(1n));
    const original = progress(2n);
    const tampered = create(EnvelopeSchema, { ...original, payload: Uint8Array.from(original.payload, (byte, i) => (i === original.payload.length - 1 ? byte ^ 1 : byte)) });
    expect(log.add(2n, tampered)?.problem).toBe("signature does not verify");
    const after = log.add(3n, complete(3n));
    expect(after?.verification.ok).toBe(true);
    expect(after?.stateAfter).toBeUndefined();
    expect(after?.problem).toBe("follows event 2, which did not verify");
    expect(states(log)).toEqual(["IDLE", "PENDING", "CONFIRMED"]);
    expect(log.broken).toEqual({ sequence: 2n, reason: "signature does not verify" });
    expect(log.allVerified).toBe(false);
    expect(log.finished).toBe(false);
  });

  it("breaks the path at a step the state machine refuses, at a gap, and at an event for someone else", () => {
    const illegal = new EventLog(executor, REQUESTER, TASK);
    // complete straight from pending is not a step the machine allows.
    expect(illegal.add(1n, complete(1n))?.problem).toBe("p2p:task_complete is not allowed after pending");
    expect(states(illegal)).toEqual(["IDLE", "PENDING"]);

    const gap = new EventLog(executor, REQUESTER, TASK);
    gap.add(1n, confirm(1n));
    expect(gap.add(3n, complete(3n))?.problem).toBe("arrived where 2 was due");
    expect(gap.broken?.sequence).toBe(3n);

    const misaddressed = new EventLog(executor, "agent_someone_else", TASK);
    expect(misaddressed.add(1n, confirm(1n))?.problem).toBe(`addressed to ${REQUESTER}, not agent_someone_else`);
  });
});
