// The console's signing code (src/console, bundled for browsers) against the
// server's own implementation, in Node: key ids and agent ids, keys signing
// with tweetnacl and with non-extractable WebCrypto keys, imported PEM and
// JWK keys, sealed messages, bearer tokens, and event verification
// including refusals.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { EnvelopeSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { DecisionAction, HumanDecisionPayloadSchema, TaskConfirmPayloadSchema, TaskRequestPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { sealMessage, sealTaskRequest, verifyEnvelope, type Executor } from "../src/console/envelopes.js";
import { KeyImportError, parsePrivateKey } from "../src/console/key-import.js";
import { identityFromSeed } from "../src/console/keys.js";
import { issueToken as consoleToken } from "../src/console/token.js";
import { identityFromCryptoKey, importSeedNonExtractable, webCryptoHasEd25519 } from "../src/console/webcrypto-keys.js";
import { generateKey, keyIdOf, keyToPem, publicJwk, selfCertifyingAgentId } from "../src/crypto/keys.js";
import { toBase64Url } from "../src/crypto/encoding.js";
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
    expect(identity.agentId).toBe(selfCertifyingAgentId(identity.publicKey));
    expect(identity.backend).toBe("tweetnacl");
  });

  it("signs with a non-extractable WebCrypto key exactly as with the seed", async () => {
    expect(await webCryptoHasEd25519()).toBe(true);
    const key = generateKey();
    const { privateKey, publicKey } = await importSeedNonExtractable(Uint8Array.from(key.seed));
    expect(privateKey.extractable).toBe(false);
    await expect(crypto.subtle.exportKey("jwk", privateKey)).rejects.toThrow();
    const viaWebCrypto = await identityFromCryptoKey(privateKey, publicKey);
    const viaSeed = await identityFromSeed(key.seed);
    expect(viaWebCrypto.backend).toBe("webcrypto");
    expect([viaWebCrypto.agentId, viaWebCrypto.keyId]).toEqual([viaSeed.agentId, viaSeed.keyId]);
    const data = new TextEncoder().encode("the same bytes");
    // Ed25519 is deterministic: both hold the same key, so the signatures are the same bytes.
    expect(await viaWebCrypto.sign(data)).toEqual(await viaSeed.sign(data));
    const { envelope } = await sealTaskRequest(viaWebCrypto, executor, { taskId: "t-wc", taskType: "text_analysis", payload: { text: "x" } });
    const opened = await open(fromBinary(EnvelopeSchema, toBinary(EnvelopeSchema, envelope)), { trust: PinnedKeys.inMemory(), self: executor.agentId });
    expect(opened.header.sender?.agentId).toBe(selfCertifyingAgentId(key.publicKey));
  });

  it("seals the requester's answers (here a human_decision) as the server's open() expects them", async () => {
    const identity = await consoleIdentity();
    const payload = create(HumanDecisionPayloadSchema, { taskId: "t-3", decisionId: "d-1", decision: { action: DecisionAction.APPROVE, approvedFields: { approved: true } } });
    const { envelope } = await sealMessage(identity, executor, { type: MessageType.HUMAN_DECISION, schema: HumanDecisionPayloadSchema, payload, taskId: "t-3" });
    const opened = await open(fromBinary(EnvelopeSchema, toBinary(EnvelopeSchema, envelope)), { trust: PinnedKeys.inMemory(), self: executor.agentId });
    expect(opened.header.messageType).toBe(MessageType.HUMAN_DECISION);
    expect(opened.header.receiver?.keyId).toBe(executor.keyId);
    expect((opened.payload as typeof payload).decision?.approvedFields).toEqual({ approved: true });
  });

  it("imports the agent.key PEM that synapse keygen writes, and an OKP JWK, and says what is wrong with anything else", () => {
    const key = generateKey();
    expect(parsePrivateKey(keyToPem(key))).toEqual(key.seed);
    const jwk = { ...publicJwk(key.publicKey), d: toBase64Url(key.seed) };
    expect(parsePrivateKey(JSON.stringify(jwk))).toEqual(key.seed);
    expect(parsePrivateKey(JSON.stringify({ ...jwk, x: undefined }))).toEqual(key.seed);
    const other = generateKey();
    expect(() => parsePrivateKey(JSON.stringify({ ...jwk, x: toBase64Url(other.publicKey) }))).toThrow(/"x" is not the public key/);
    expect(() => parsePrivateKey(JSON.stringify(publicJwk(key.publicKey)))).toThrow(/no private part/);
    expect(() => parsePrivateKey("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----")).toThrow(/encrypted/);
    expect(() => parsePrivateKey("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VuBCIEIA==\n-----END PRIVATE KEY-----")).toThrow(KeyImportError);
    expect(() => parsePrivateKey("")).toThrow(/paste a key/);
    expect(() => parsePrivateKey("nonsense")).toThrow(/neither a PEM nor a JSON Web Key/);
  });

  it("seals a task_request that the server's open() accepts", async () => {
    const identity = await consoleIdentity();
    const { envelope } = await sealTaskRequest(identity, executor, { taskId: "t-1", taskType: "text_analysis", payload: { text: "a b" } });
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
    const token = await consoleToken(identity, executor.agentId);
    const caller = await verifyToken(token, { audience: executor.agentId, trust: PinnedKeys.inMemory() });
    expect(caller).toEqual({ agentId: identity.agentId, keyId: identity.keyId, firstUse: true });
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
    const expected = { executor, receiver: identity.agentId, taskId: "t-2", sequence: 1n };
    const ok = verifyEnvelope(event, { ...expected, checkTime: true });
    expect(ok.ok && ok.type).toBe(MessageType.TASK_CONFIRM);

    const tampered = create(EnvelopeSchema, { ...event, payload: Uint8Array.from(event.payload, (byte, i) => (i === 0 ? byte ^ 1 : byte)) });
    expect(verifyEnvelope(tampered, expected)).toMatchObject({ ok: false, reason: "signature does not verify" });
    // A refusal still shows what the message claims, parsed only for display.
    expect(verifyEnvelope(tampered, expected).header?.sequence).toBe(1n);
    expect(verifyEnvelope(event, { ...expected, receiver: "someone_else" })).toMatchObject({ ok: false, reason: "addressed to " + identity.agentId + ", not someone_else" });
    expect(verifyEnvelope(event, { ...expected, sequence: 2n }).ok).toBe(false);
    expect(verifyEnvelope(event, { ...expected, checkTime: true, nowMs: Date.now() + 10 * 60 * 1000 }).ok).toBe(false);

    const other = generateKey();
    const foreign = seal({ messageType: MessageType.TASK_CONFIRM, payload: create(TaskConfirmPayloadSchema, { taskId: "t-2" }), sender: { agentId: executor.agentId }, receiver: { agentId: identity.agentId }, taskId: "t-2", sequence: 1n }, other).envelope;
    expect(verifyEnvelope(foreign, expected).ok).toBe(false);
    expect(verifyEnvelope(undefined, expected)).toEqual({ ok: false, reason: "no signature" });
  });
});
