// The console's confidential code (src/console, WebCrypto) against the
// server's own (node:crypto), in Node, both ways: a request the console
// seals opens with the executor's key and open(); an event the executor
// seals opens in the console, and each way of getting it wrong is refused
// with its code; the executor's binding is checked against its identity
// key; result records are the same bytes.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentCapabilitiesSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { EnvelopeSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskConfirmPayloadSchema, TaskInfoProvidedPayloadSchema, TaskRequestPayloadSchema, type TaskConfirmPayload } from "../gen/synapse/v1/payloads_pb.js";
import { ConfidentialRefusal, currentEncryptionKey, encryptionKeyIdOf, openResult, sealResult, unwrapTaskKey } from "../src/console/confidential.js";
import { sealMessage, sealTaskRequest, type Executor } from "../src/console/envelopes.js";
import { generateX25519 as consoleX25519 } from "../src/console/hpke.js";
import { identityFromSeed } from "../src/console/keys.js";
import { TaskKeys, verifyMessage } from "../src/console/task-keys.js";
import { encryptionKeyIdOf as serverEncryptionKeyIdOf, encryptionKeyOf, EncryptionKeyRing } from "../src/crypto/encryption-keys.js";
import { generateX25519 } from "../src/crypto/hpke.js";
import { generateKey } from "../src/crypto/keys.js";
import { newTaskKey, openResult as serverOpenResult, sealConfidential, sealResult as serverSealResult, unwrapRequestKey } from "../src/envelope/confidential.js";
import { signEncryptionKey } from "../src/envelope/encryption-binding.js";
import { open } from "../src/envelope/open.js";
import { PinnedKeys } from "../src/envelope/trust-sources.js";

const EXECUTOR = "agent_exec";
const executorKey = generateKey();
const executor: Executor = { agentId: EXECUTOR, systemId: "synapse", keyId: executorKey.keyId, publicKey: executorKey.publicKey };
const executorEncryption = encryptionKeyOf(generateX25519(), Date.now());
const ring = new EncryptionKeyRing(executorEncryption);
const capabilities = create(AgentCapabilitiesSchema, {
  agentId: EXECUTOR,
  keyId: executorKey.keyId,
  publicKey: executorKey.publicKey,
  encryptionKeys: [signEncryptionKey(EXECUTOR, executorKey, executorEncryption)],
});

async function party() {
  const identity = await identityFromSeed(generateKey().seed);
  const { privateKey, publicKey } = await consoleX25519();
  const encryption = { privateKey, publicKey, keyId: await encryptionKeyIdOf(publicKey) };
  return { identity, encryption, keys: new TaskKeys(identity, encryption, async (taskId) => Promise.reject(new Error(`no GetTask here (${taskId})`))) };
}

const reencoded = (envelope: Parameters<typeof toBinary<typeof EnvelopeSchema>>[1]) => fromBinary(EnvelopeSchema, toBinary(EnvelopeSchema, envelope));

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return error instanceof ConfidentialRefusal ? error.code : String(error);
  }
  return "accepted";
}

describe("the console's confidential tasks, checked by the server's implementation", () => {
  it("computes the same X25519 key id", async () => {
    const { publicKey } = await consoleX25519();
    expect(await encryptionKeyIdOf(publicKey)).toBe(serverEncryptionKeyIdOf(publicKey));
  });

  it("seals a task request the executor opens, its key wrapped to the executor and to the console", async () => {
    const { identity, encryption, keys } = await party();
    const sealing = await keys.forNewTask("t-secret", executor, capabilities);
    const { envelope } = await sealTaskRequest(identity, executor, { taskId: "t-secret", taskType: "summarization", payload: { text: "The vault code is 4411." }, sealing });
    expect(envelope.signature?.value.byteLength).toBe(0);
    expect(Buffer.from(envelope.payload).includes(Buffer.from("4411"))).toBe(false);
    const opened = await open(reencoded(envelope), { trust: PinnedKeys.inMemory(), self: EXECUTOR, confidential: { taskKey: (header) => unwrapRequestKey(header, EXECUTOR, ring) } });
    expect(opened.header.messageType).toBe(MessageType.TASK_REQUEST);
    expect(Buffer.from(opened.taskKey!).equals(Buffer.from(sealing.taskKey))).toBe(true);
    expect(JSON.stringify((opened.payload as ReturnType<typeof create<typeof TaskRequestPayloadSchema>>).task?.payload)).toContain("4411");
    // The console's own entry opens with its own key, to the same task key.
    const own = await unwrapTaskKey(opened.header.confidential!, "t-secret", { agentId: identity.agentId, keyId: identity.keyId }, identity.agentId, encryption);
    expect(Buffer.from(own).equals(Buffer.from(sealing.taskKey))).toBe(true);
    // Wrapped to the console, the key does not open as the executor's nor the other way round.
    expect(await refusal(unwrapTaskKey(opened.header.confidential!, "t-secret", { agentId: identity.agentId, keyId: identity.keyId }, "agent_other", encryption))).toBe("encryption_key_unknown");
    expect(await refusal(unwrapTaskKey(opened.header.confidential!, "t-other", { agentId: identity.agentId, keyId: identity.keyId }, identity.agentId, encryption))).toBe("decryption_failed");
  });

  it("seals an answer with the task key, which the executor opens", async () => {
    const { identity, keys } = await party();
    const { taskKey } = await keys.forNewTask("t-answer", executor, capabilities);
    const payload = create(TaskInfoProvidedPayloadSchema, { taskId: "t-answer", fields: { max_sentences: 2 }, note: "a private note" });
    const { envelope } = await sealMessage(identity, executor, { type: MessageType.TASK_INFO_PROVIDED, schema: TaskInfoProvidedPayloadSchema, payload, taskId: "t-answer", sealing: { taskKey } });
    expect(Buffer.from(envelope.payload).includes(Buffer.from("private note"))).toBe(false);
    const opened = await open(reencoded(envelope), { trust: PinnedKeys.inMemory(), self: EXECUTOR, confidential: { taskKey: () => taskKey } });
    expect(opened.header.messageType).toBe(MessageType.TASK_INFO_PROVIDED);
    expect((opened.payload as typeof payload).note).toBe("a private note");
    // Another task's key does not open it.
    const other = newTaskKey();
    const code = await open(reencoded(envelope), { trust: PinnedKeys.inMemory(), self: EXECUTOR, confidential: { taskKey: () => other } }).then(
      () => "opened",
      (error: unknown) => String(error),
    );
    expect(code).toMatch(/task key/);
  });

  it("opens an event the executor sealed, and refuses a tampered, a foreign-keyed and a plaintext one", async () => {
    const { identity, keys } = await party();
    const { taskKey } = await keys.forNewTask("t-event", executor, capabilities);
    const event = (key = taskKey) =>
      sealConfidential(
        { messageType: MessageType.TASK_CONFIRM, payload: create(TaskConfirmPayloadSchema, { taskId: "t-event", capabilitiesUsed: ["secret schedule"] }), sender: { agentId: EXECUTOR }, receiver: { agentId: identity.agentId }, taskId: "t-event", sequence: 1n },
        executorKey,
        { taskKey: key },
      ).envelope;
    const expect1 = { executor, receiver: identity.agentId, taskId: "t-event", sequence: 1n, confidential: true };
    const checked = await verifyMessage(keys, executor, reencoded(event()), expect1);
    expect(checked.verification.ok).toBe(true);
    if (checked.verification.ok) {
      expect(checked.verification.sealed).toBe(true);
      expect(checked.verification.type).toBe(MessageType.TASK_CONFIRM);
      expect((checked.verification.payload as TaskConfirmPayload).capabilitiesUsed).toEqual(["secret schedule"]);
    }
    const tampered = reencoded(event());
    tampered.payload[3]! ^= 1;
    expect((await verifyMessage(keys, executor, tampered, expect1)).verification).toMatchObject({ ok: false, reason: expect.stringMatching(/^decryption_failed/) });
    expect((await verifyMessage(keys, executor, reencoded(event(newTaskKey())), expect1)).verification).toMatchObject({ ok: false, reason: expect.stringMatching(/^encryption_key_unknown/) });
    const plain = await sealMessage(identity, executor, { type: MessageType.TASK_CONFIRM, schema: TaskConfirmPayloadSchema, payload: create(TaskConfirmPayloadSchema, { taskId: "t-event" }), taskId: "t-event" });
    expect((await verifyMessage(keys, executor, plain.envelope, expect1)).verification).toMatchObject({ ok: false, reason: expect.stringMatching(/^confidentiality_required/) });
    // Without an X25519 key the console shows it sealed, as before.
    const without = new TaskKeys(identity, undefined, async () => Promise.reject(new Error("unused")));
    expect((await verifyMessage(without, executor, reencoded(event()), expect1)).verification).toMatchObject({ ok: false, reason: expect.stringMatching(/^sealed: .*no X25519/) });
  });

  it("accepts the executor's encryption key only as its identity key signed it", async () => {
    const binding = await currentEncryptionKey(capabilities.encryptionKeys, EXECUTOR, executorKey.publicKey);
    expect(binding.keyId).toBe(executorEncryption.keyId);
    expect(await refusal(currentEncryptionKey(capabilities.encryptionKeys, "agent_someone_else", executorKey.publicKey))).toBe("encryption_key_unknown");
    // A proxy that swaps in its own key cannot sign the binding with the executor's identity.
    const swapped = signEncryptionKey(EXECUTOR, generateKey(), encryptionKeyOf(generateX25519(), Date.now()));
    expect(await refusal(currentEncryptionKey([swapped], EXECUTOR, executorKey.publicKey))).toBe("encryption_key_unknown");
    const { keys } = await party();
    expect(await refusal(keys.forNewTask("t-none", executor, create(AgentCapabilitiesSchema, { ...capabilities, encryptionKeys: [swapped] })))).toBe("encryption_key_unknown");
  });

  it("seals result records byte for byte as the server does, and opens the server's", async () => {
    const taskKey = newTaskKey();
    const plaintext = new Uint8Array(Array.from({ length: 140_000 }, (_, i) => (i * 7) % 256));
    const mine = await sealResult(taskKey, "t-result", plaintext);
    expect(Buffer.from(mine).equals(serverSealResult(taskKey, "t-result", plaintext))).toBe(true);
    expect(Buffer.from(serverOpenResult(taskKey, "t-result", mine)).equals(Buffer.from(plaintext))).toBe(true);
    expect(Buffer.from(await openResult(taskKey, "t-result", serverSealResult(taskKey, "t-result", plaintext))).equals(Buffer.from(plaintext))).toBe(true);
    expect(await refusal(openResult(taskKey, "t-result", mine.subarray(0, 65_552)))).toBe("decryption_failed");
  });
});
