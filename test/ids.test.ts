// The ids the package makes (message and task ids): RFC 9562 version 7
// UUIDs, in time order, through seal, the client and the CLI.
import { create } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskRequestPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { generateKey } from "../src/crypto/keys.js";
import { seal } from "../src/envelope/seal.js";
import { uuidV7 } from "../src/protocol/ids.js";

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The milliseconds a version 7 id carries (its first 48 bits). */
const msOf = (id: string) => parseInt(id.replaceAll("-", "").slice(0, 12), 16);

describe("uuidV7", () => {
  it("makes distinct version 7 ids, past the random pool's refill", () => {
    const ids = Array.from({ length: 1000 }, () => uuidV7());
    for (const id of ids) expect(id).toMatch(V7);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("carries its time in its first 48 bits", () => {
    expect(uuidV7(0x0123456789ab)).toMatch(/^01234567-89ab-7/);
    const before = Date.now();
    const id = uuidV7();
    expect(msOf(id)).toBeGreaterThanOrEqual(before);
    expect(msOf(id)).toBeLessThanOrEqual(Date.now());
  });

  it("sorts as text in the order of its time", () => {
    const MAX = 2 ** 48 - 1;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX - 1 }), fc.integer({ min: 1, max: 10_000 }), (earlier, gap) => {
        const later = Math.min(MAX, earlier + gap);
        expect(uuidV7(earlier) < uuidV7(later)).toBe(true);
        expect(msOf(uuidV7(earlier))).toBe(earlier);
      }),
      { numRuns: 300 },
    );
  });

  it("is what seal gives a message without an id, at the message's sent time", () => {
    const { header } = seal(
      {
        messageType: MessageType.TASK_REQUEST,
        payload: create(TaskRequestPayloadSchema, { task: { id: "t1", type: "text_analysis", payload: { text: "hi" } } }),
        sender: { agentId: "alice" },
        receiver: { agentId: "bob" },
        taskId: "t1",
        sentAtMs: 1_767_225_600_123,
      },
      generateKey(),
    );
    expect(header.messageId).toMatch(V7);
    expect(msOf(header.messageId)).toBe(1_767_225_600_123);
  });
});
