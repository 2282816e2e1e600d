// The operator console's signing code (src/console, bundled for browsers)
// against the server's own implementation, in Node: key ids, sealed
// task_requests, bearer tokens, and event verification including refusals.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { EnvelopeSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskConfirmPayloadSchema, TaskRequestPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { sealTaskRequest, verifyEnvelope, type Executor } from "../src/console/envelopes.js";
import { identityFromSeed } from "../src/console/keys.js";
import { issueToken as consoleToken } from "../src/console/token.js";
import { generateKey, keyIdOf } from "../src/crypto/keys.js";
import { verifyToken } from "../src/crypto/tokens.js";
import { open } from "../src/envelope/open.js";
import { seal } from "../src/envelope/seal.js";
import { PinnedKeys } from "../src/envelope/trust-sources.js";

const executorKey = generateKey();
const executor: Executor = { agentId: "agent_exec", systemId: "synapse", keyId: executorKey.keyId, publicKey: executorKey.publicKey };

async function consoleIdentity() {
  return identityFromSeed(generateKey().seed);
}

describe("operator console crypto, checked by the server's implementation", () => {
  it("computes the same key id (RFC 7638 thumbprint) as the server", async () => {
    const identity = await consoleIdentity();
    expect(identity.keyId).toBe(keyIdOf(identity.publicKey));
    expect(identity.agentId).toMatch(/^agent_[0-9a-f]{32}$/);
  });

  it("seals a task_request that the server's open() accepts", async () => {
    const identity = await consoleIdentity();
    const { envelope } = sealTaskRequest(identity, executor, { taskId: "t-1", taskType: "text_analysis", payload: { text: "a b" } });
    // Through the wire form and back, as the server would receive it.
    const received = fromBinary(EnvelopeSchema, toBinary(EnvelopeSchema, envelope));
    const opened = await open(received, { trust: PinnedKeys.inMemory(), self: executor.agentId });
    expect(opened.header.messageType).toBe(MessageType.TASK_REQUEST);
    expect(opened.header.sender?.agentId).toBe(identity.agentId);
    expect(opened.header.taskId).toBe("t-1");
    const payload = fromBinary(TaskRequestPayloadSchema, received.payload);
    expect(payload.task?.type).toBe("text_analysis");
    expect(payload.task?.payload).toEqual({ text: "a b" });
  });

  it("issues a bearer token that the server's verifyToken accepts", async () => {
    const identity = await consoleIdentity();
    const token = consoleToken(identity, executor.agentId);
    const caller = await verifyToken(token, { audience: executor.agentId, trust: PinnedKeys.inMemory() });
    expect(caller).toEqual({ agentId: identity.agentId, keyId: identity.keyId });
    await expect(verifyToken(token, { audience: "someone_else", trust: PinnedKeys.inMemory() })).rejects.toThrow(/aud/);
  });

  it("verifies an executor event, and refuses a tampered, misaddressed or foreign one", async () => {
    const identity = await consoleIdentity();
    const event = seal(
      {
        messageType: MessageType.TASK_CONFIRM,
        payload: create(TaskConfirmPayloadSchema, { taskId: "t-2", confirmed: true }),
        sender: { agentId: executor.agentId },
        receiver: { agentId: identity.agentId },
        taskId: "t-2",
        sequence: 1n,
      },
      executorKey,
    ).envelope;
    const expected = { executor, self: identity.agentId, taskId: "t-2", sequence: 1n };
    const ok = verifyEnvelope(event, { ...expected, checkTime: true });
    expect(ok.ok && ok.type).toBe(MessageType.TASK_CONFIRM);

    const tampered = create(EnvelopeSchema, { ...event, payload: Uint8Array.from(event.payload, (byte, i) => (i === 0 ? byte ^ 1 : byte)) });
    expect(verifyEnvelope(tampered, expected)).toEqual({ ok: false, reason: "signature does not verify" });
    expect(verifyEnvelope(event, { ...expected, self: "someone_else" }).ok).toBe(false);
    expect(verifyEnvelope(event, { ...expected, sequence: 2n }).ok).toBe(false);
    expect(verifyEnvelope(event, { ...expected, checkTime: true, nowMs: Date.now() + 10 * 60 * 1000 }).ok).toBe(false);

    const other = generateKey();
    const foreign = seal({ messageType: MessageType.TASK_CONFIRM, payload: create(TaskConfirmPayloadSchema, { taskId: "t-2" }), sender: { agentId: executor.agentId }, receiver: { agentId: identity.agentId }, taskId: "t-2", sequence: 1n }, other).envelope;
    expect(verifyEnvelope(foreign, expected).ok).toBe(false);
    expect(verifyEnvelope(undefined, expected)).toEqual({ ok: false, reason: "no signature" });
  });
});
