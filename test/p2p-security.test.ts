// Every refusal on the inbound path: signatures, trust, receiver, time,
// replay, idempotency, roles, illegal transitions, bearer tokens.
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SignJWT } from "jose";
import { createPrivateKey } from "node:crypto";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvelopeSchema, HeaderSchema, MessageType, type Envelope } from "../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { DecisionAction, HumanDecisionPayloadSchema, TaskCompletePayloadSchema, TaskRequestPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import { pkcs8FromSeed } from "../src/crypto/ed25519.js";
import { toBase64Url } from "../src/crypto/encoding.js";
import { generateKey, publicJwk } from "../src/crypto/keys.js";
import { issueToken } from "../src/crypto/tokens.js";
import { buildHeader, seal, signParts } from "../src/envelope/seal.js";
import { PinnedKeys, TrustChain, TrustStore } from "../src/envelope/trust-sources.js";
import { sqliteStorage } from "../src/store/sqlite/index.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { connectClient, requesterIdentity, startTestServer, tempDir, type TestServer } from "./helpers/server.js";

let server: TestServer;
let raw: ReturnType<typeof createClient<typeof P2PService>>;

beforeAll(async () => {
  server = await startTestServer({ agentId: "executor_security" });
  raw = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
});
afterAll(() => server.close());

async function refusal(attempt: Promise<unknown>): Promise<{ code: Code; protocolCode?: string; details?: unknown; message: string }> {
  const error = await attempt.then(
    () => {
      throw new Error("expected a refusal");
    },
    (e: unknown) => e,
  );
  const connectError = ConnectError.from(error);
  const detail = findErrorDetail(connectError);
  return { code: connectError.code, protocolCode: detail?.protocolCode, details: detail?.details, message: connectError.rawMessage };
}

function request(taskId: string) {
  return create(TaskRequestPayloadSchema, { task: { id: taskId, type: "text_analysis", payload: { text: "Hello there." } } });
}

describe("envelopes", () => {
  it("refuses unsigned and tampered envelopes as UNAUTHENTICATED, and keeps serving", async () => {
    const client = await connectClient(server);
    const envelope = client.envelope(MessageType.TASK_REQUEST, request("t-tamper"), { taskId: "t-tamper" });
    const unsigned = create(EnvelopeSchema, { header: envelope.header, payload: envelope.payload });
    expect(await refusal(raw.send({ envelope: unsigned }))).toMatchObject({ code: Code.Unauthenticated, protocolCode: "signature_invalid" });
    const payload = Uint8Array.from(envelope.payload);
    payload[payload.length - 2]! ^= 0x20;
    expect(await refusal(raw.send({ envelope: { ...envelope, payload } }))).toMatchObject({ code: Code.Unauthenticated, protocolCode: "signature_invalid" });
    expect(await refusal(raw.send({}))).toMatchObject({ code: Code.InvalidArgument });
    // Nothing was created, and the untouched envelope still goes through.
    const ok = await raw.send({ envelope });
    expect(ok.task?.taskId).toBe("t-tamper");
  });

  it("refuses a message addressed to another agent as PERMISSION_DENIED", async () => {
    const identity = await requesterIdentity();
    const { envelope } = seal({ messageType: MessageType.TASK_REQUEST, payload: request("t-x"), sender: { agentId: identity.agentId }, receiver: { agentId: "someone_else" }, taskId: "t-x" }, identity.key);
    expect(await refusal(raw.send({ envelope }))).toMatchObject({ code: Code.PermissionDenied, protocolCode: "wrong_receiver" });
  });

  it("refuses expired messages and messages outside the clock skew", async () => {
    const identity = await requesterIdentity();
    const base = { messageType: MessageType.TASK_REQUEST, payload: request("t-old"), sender: { agentId: identity.agentId }, receiver: { agentId: "executor_security" }, taskId: "t-old" };
    const expired = seal({ ...base, sentAtMs: Date.now() - 60_000, ttlMs: 30_000 }, identity.key).envelope;
    expect(await refusal(raw.send({ envelope: expired }))).toMatchObject({ code: Code.Unauthenticated, protocolCode: "message_expired" });
    const future = seal({ ...base, sentAtMs: Date.now() + 10 * 60_000 }, identity.key).envelope;
    expect(await refusal(raw.send({ envelope: future }))).toMatchObject({ code: Code.Unauthenticated, protocolCode: "message_expired" });
  });

  it("pins a sender's key on first use and refuses a different key for the same agent id later", async () => {
    const path = join(await tempDir(), "synapse.db");
    let storage = sqliteStorage(path);
    const pinning = await startTestServer({ agentId: "executor_pins", trust: new PinnedKeys(storage.pins) });
    try {
      const alice = await requesterIdentity();
      const first = await connectClient(pinning, { identity: alice });
      expect((await first.submit("text_analysis", { text: "Hi." })).task?.taskId).toBeDefined();
      expect((await storage.pins.getPin(alice.agentId))?.keyId).toBe(alice.key.keyId);

      const impostor = { ...alice, key: generateKey() };
      const second = await connectClient(pinning, { identity: impostor });
      expect(await refusal(second.submit("text_analysis", { text: "Hi." }))).toMatchObject({ code: Code.Unauthenticated, protocolCode: "unknown_sender" });
      // The pin survives a restart of the store.
      await storage.close();
      storage = sqliteStorage(path);
      expect(await new PinnedKeys(storage.pins).check(alice.agentId, impostor.key.keyId, impostor.key.publicKey)).toEqual({ kind: "conflict", expectedKeyId: alice.key.keyId });
    } finally {
      await pinning.close();
      await storage.close();
    }
  });

  it("cannot be squatted: only an id derived from the key is pinned on first use", async () => {
    const path = join(await tempDir(), "synapse.db");
    let storage = sqliteStorage(path);
    let guarded = await startTestServer({ agentId: "executor_squat", trust: new PinnedKeys(storage.pins) });
    try {
      const owner = await requesterIdentity();
      // A stranger claims a name nobody has used yet, and then the owner's own derived id, each with its own key.
      for (const claimed of ["bob", owner.agentId]) {
        const squatter = await connectClient(guarded, { identity: { ...owner, agentId: claimed, key: generateKey() } });
        const refused = await refusal(squatter.submit("text_analysis", { text: "Mine now." }));
        expect(refused).toMatchObject({ code: Code.Unauthenticated, protocolCode: "unknown_sender" });
        expect(refused.message).toContain("derived from its key");
        expect(await storage.pins.getPin(claimed)).toBeUndefined();
      }
      // The owner is not locked out, also after a restart.
      await guarded.close();
      await storage.close();
      storage = sqliteStorage(path);
      guarded = await startTestServer({ agentId: "executor_squat", trust: new PinnedKeys(storage.pins) });
      const real = await connectClient(guarded, { identity: owner });
      expect((await real.submit("text_analysis", { text: "Still mine." }, { waitMs: 5000 })).task?.state).toBe(TaskState.COMPLETED);
      // A name that is not derived from a key needs a trust store or a registry to vouch for it.
      const bob = { ...owner, agentId: "bob" };
      const vouched = await startTestServer({ agentId: "executor_vouched", trust: new TrustChain([new TrustStore([{ agentId: "bob", publicKey: bob.key.publicKey }]), new PinnedKeys(storage.pins)]) });
      try {
        expect((await (await connectClient(vouched, { identity: bob })).submit("text_analysis", { text: "Vouched." }, { waitMs: 5000 })).task?.state).toBe(TaskState.COMPLETED);
      } finally {
        await vouched.close();
      }
    } finally {
      await guarded.close();
      await storage.close();
    }
  });

  it("with a trust store, refuses agents it does not list", async () => {
    const listed = await requesterIdentity("listed");
    const strict = await startTestServer({ agentId: "executor_strict", trust: new TrustStore([{ agentId: "listed", publicKey: listed.key.publicKey }]) });
    try {
      const ok = await connectClient(strict, { identity: listed });
      expect((await ok.submit("text_analysis", { text: "Hi." })).task).toBeDefined();
      const stranger = await connectClient(strict);
      expect(await refusal(stranger.submit("text_analysis", { text: "Hi." }))).toMatchObject({ code: Code.Unauthenticated, protocolCode: "unknown_sender" });
    } finally {
      await strict.close();
    }
  });

  it("loads a trust-store file", async () => {
    const identity = await requesterIdentity("from_file");
    const path = join(await tempDir(), "trust.json");
    const { writeFile } = await import("node:fs/promises");
    await writeFile(path, JSON.stringify({ agents: [{ agent_id: "from_file", public_key: toBase64Url(identity.key.publicKey) }] }));
    const store = await TrustStore.load(path);
    expect(store.check("from_file", identity.key.keyId)).toEqual({ kind: "trusted" });
    expect(store.check("other", identity.key.keyId)).toEqual({ kind: "unknown" });
  });
});

describe("replay and idempotency", () => {
  it("answers an exact re-delivery with the same reply and no second effect", async () => {
    const client = await connectClient(server);
    const envelope = client.envelope(MessageType.TASK_REQUEST, request("t-replay"), { taskId: "t-replay" });
    const first = await raw.send({ envelope });
    const second = await raw.send({ envelope });
    expect(toBinary(EnvelopeSchema, second.reply!.envelope!)).toEqual(toBinary(EnvelopeSchema, first.reply!.envelope!));
    const { tasks } = await client.listTasks();
    expect(tasks.filter((task) => task.taskId === "t-replay")).toHaveLength(1);
    expect((await client.getTask("t-replay")).lastSequence).toBeGreaterThan(0n);
  });

  it("refuses a different envelope that reuses a message id", async () => {
    const identity = await requesterIdentity();
    await connectClient(server, { identity });
    const messageId = crypto.randomUUID();
    const common = { messageType: MessageType.TASK_REQUEST, sender: { agentId: identity.agentId }, receiver: { agentId: "executor_security" }, messageId };
    await raw.send({ envelope: seal({ ...common, payload: request("t-m1"), taskId: "t-m1" }, identity.key).envelope });
    const reused = seal({ ...common, payload: request("t-m2"), taskId: "t-m2" }, identity.key).envelope;
    expect(await refusal(raw.send({ envelope: reused }))).toMatchObject({ code: Code.AlreadyExists, protocolCode: "replay_detected" });
  });

  it("honours a task_request's idempotency key", async () => {
    const client = await connectClient(server);
    const first = await client.submit("text_analysis", { text: "Once." }, { idempotencyKey: "order-42" });
    const again = await client.submit("text_analysis", { text: "Once." }, { idempotencyKey: "order-42" });
    expect(again.task?.taskId).toBe(first.taskId);
    expect(again.reply?.header.messageId).toBe(first.reply?.header.messageId);
    const { tasks } = await client.listTasks();
    expect(tasks).toHaveLength(1);
  });

  it("refuses a task id that is already in use, by this requester or another, as ALREADY_EXISTS / invalid_params", async () => {
    const client = await connectClient(server);
    await client.submit("text_analysis", { text: "a." }, { taskId: "t-dup" });
    expect(await refusal(client.submit("text_analysis", { text: "b." }, { taskId: "t-dup" }))).toMatchObject({ code: Code.AlreadyExists, protocolCode: "invalid_params" });
    const other = await connectClient(server);
    expect(await refusal(other.submit("text_analysis", { text: "c." }, { taskId: "t-dup" }))).toMatchObject({ code: Code.AlreadyExists, protocolCode: "invalid_params" });
  });

  it("keeps message ids per receiver, not per sender: another sender reusing an id is refused", async () => {
    const first = await requesterIdentity();
    const second = await requesterIdentity();
    const messageId = crypto.randomUUID();
    const sealFor = (identity: typeof first, taskId: string) =>
      seal({ messageType: MessageType.TASK_REQUEST, sender: { agentId: identity.agentId }, receiver: { agentId: "executor_security" }, messageId, payload: request(taskId), taskId }, identity.key)
        .envelope;
    await raw.send({ envelope: sealFor(first, "t-scope-1") });
    expect(await refusal(raw.send({ envelope: sealFor(second, "t-scope-2") }))).toMatchObject({ code: Code.AlreadyExists, protocolCode: "replay_detected" });
    // Refused, so nothing was created: the second sender may use the task id with a fresh message id.
    const again = await raw.send({ envelope: seal({ messageType: MessageType.TASK_REQUEST, sender: { agentId: second.agentId }, receiver: { agentId: "executor_security" }, payload: request("t-scope-2"), taskId: "t-scope-2" }, second.key).envelope });
    expect(again.task?.taskId).toBe("t-scope-2");
  });
});

describe("human decisions: decision_id", () => {
  const decision = (decisionId: string, action: DecisionAction) => create(HumanDecisionPayloadSchema, { decisionId, decision: { action } });

  it("an empty decision_id answers the pending decision; another id is invalid_params and changes nothing; an action is required", async () => {
    const client = await connectClient(server);
    const asked = async (taskId: string) => {
      const { task } = await client.submit("text_analysis", { text: "a b. a.", require_approval: true }, { taskId, waitMs: 5000 });
      expect(task?.state).toBe(TaskState.NEED_HUMAN);
      return task!.pendingDecision!.decisionId;
    };
    const pending = await asked("t-decide-1");
    expect(pending).not.toBe("");
    const noAction = await refusal(raw.send({ envelope: client.envelope(MessageType.HUMAN_DECISION, decision(pending, DecisionAction.UNSPECIFIED), { taskId: "t-decide-1" }) }));
    expect(noAction).toMatchObject({ code: Code.InvalidArgument, protocolCode: "invalid_params" });
    const wrong = await refusal(raw.send({ envelope: client.envelope(MessageType.HUMAN_DECISION, decision("not-the-pending-one", DecisionAction.APPROVE), { taskId: "t-decide-1" }) }));
    expect(wrong).toMatchObject({ code: Code.InvalidArgument, protocolCode: "invalid_params" });
    expect(wrong.message).toContain(pending);
    expect((await client.getTask("t-decide-1")).state).toBe(TaskState.NEED_HUMAN);
    const answered = await raw.send({ envelope: client.envelope(MessageType.HUMAN_DECISION, decision("", DecisionAction.APPROVE), { taskId: "t-decide-1" }) });
    expect(answered.task?.state).not.toBe(TaskState.NEED_HUMAN);

    const pendingToo = await asked("t-decide-2");
    const exact = await raw.send({ envelope: client.envelope(MessageType.HUMAN_DECISION, decision(pendingToo, DecisionAction.APPROVE), { taskId: "t-decide-2" }) });
    expect(exact.task?.state).not.toBe(TaskState.NEED_HUMAN);
    // Once decided, another decision is a transition the state machine refuses.
    const late = await refusal(raw.send({ envelope: client.envelope(MessageType.HUMAN_DECISION, decision("", DecisionAction.APPROVE), { taskId: "t-decide-2" }) }));
    expect(late.code).toBe(Code.FailedPrecondition);
  });
});

describe("roles and transitions", () => {
  it("lets only the requester cancel, inform or decide; to anyone else the task does not exist", async () => {
    const owner = await connectClient(server);
    const other = await connectClient(server);
    const { taskId } = await owner.submit("summarization", { text: "One. Two. Three." });
    expect(await refusal(other.cancel(taskId))).toMatchObject({ code: Code.NotFound, protocolCode: "task_not_found" });
    expect(await refusal(other.provideInfo(taskId, { max_sentences: 1 }))).toMatchObject({ code: Code.NotFound, protocolCode: "task_not_found" });
    expect((await owner.getTask(taskId)).state).toBe(TaskState.INFO_NEEDED);
  });

  it("refuses an illegal message with FAILED_PRECONDITION naming the state and type, changing nothing", async () => {
    const client = await connectClient(server);
    const { taskId } = await client.submit("text_analysis", { text: "Hi.", require_approval: true }, { waitMs: 5000 });
    const before = await client.getTask(taskId);
    const result = await refusal(client.provideInfo(taskId, { x: 1 }));
    expect(result).toMatchObject({ code: Code.FailedPrecondition, protocolCode: "illegal_transition" });
    expect(result.details).toMatchObject({ state: "TASK_STATE_NEED_HUMAN", message_type: "MESSAGE_TYPE_TASK_INFO_PROVIDED" });
    const after = await client.getTask(taskId);
    expect(after.lastSequence).toBe(before.lastSequence);
    expect(after.state).toBe(TaskState.NEED_HUMAN);
  });

  it("refuses executor messages from a requester", async () => {
    const client = await connectClient(server);
    const { taskId } = await client.submit("text_analysis", { text: "Hi." }, { waitMs: 5000 });
    const forged = client.envelope(MessageType.TASK_COMPLETE, create(TaskCompletePayloadSchema, { taskId }), { taskId });
    expect(await refusal(client.sendEnvelope(forged))).toMatchObject({ code: Code.PermissionDenied });
    const unknown = client.envelope(MessageType.TASK_COMPLETE, create(TaskCompletePayloadSchema, { taskId: "nope" }), { taskId: "nope" });
    expect(await refusal(client.sendEnvelope(unknown))).toMatchObject({ code: Code.NotFound, protocolCode: "task_not_found" });
  });

  it("refuses a payload that names another task than its header", async () => {
    const client = await connectClient(server);
    const mismatched = client.envelope(MessageType.TASK_REQUEST, request("t-a"), { taskId: "t-b" });
    expect(await refusal(client.sendEnvelope(mismatched))).toMatchObject({ code: Code.InvalidArgument, protocolCode: "message_format_invalid" });
  });

  it("survives garbage header bytes signed by a valid key", async () => {
    const identity = await requesterIdentity();
    const envelope: Envelope = signParts(new Uint8Array([0xff, 0xff, 0xff, 0xff]), new Uint8Array(), identity.key);
    expect(await refusal(raw.send({ envelope }))).toMatchObject({ code: Code.InvalidArgument, protocolCode: "message_format_invalid" });
    const header = buildHeader({ messageType: MessageType.TASK_REQUEST, payload: request("t-g"), sender: { agentId: identity.agentId }, receiver: { agentId: "executor_security" }, taskId: "t-g" }, identity.key);
    const badPayload = signParts(toBinary(HeaderSchema, header), new Uint8Array([0x0a, 0x05, 0x01]), identity.key);
    expect(await refusal(raw.send({ envelope: badPayload }))).toMatchObject({ code: Code.InvalidArgument });
  });
});

describe("bearer tokens", () => {
  it("are required, must name this agent as audience, must not be expired or long-lived", async () => {
    const client = await connectClient(server);
    const identity = (await loadOrCreateIdentity(await tempDir())).identity;
    const { taskId } = await client.submit("text_analysis", { text: "Hi." });
    const get = (token?: string) => raw.getTask({ taskId }, token ? { headers: { Authorization: `Bearer ${token}` } } : undefined);
    expect(await refusal(get())).toMatchObject({ code: Code.Unauthenticated, protocolCode: "unauthenticated" });
    expect(await refusal(get("not-a-jwt"))).toMatchObject({ code: Code.Unauthenticated });
    const wrongAudience = await issueToken(identity.key, { agentId: identity.agentId, audience: "someone_else" });
    expect(await refusal(get(wrongAudience))).toMatchObject({ code: Code.Unauthenticated });
    const expired = await issueToken(identity.key, { agentId: identity.agentId, audience: "executor_security", nowMs: Date.now() - 10 * 60_000 });
    expect(await refusal(get(expired))).toMatchObject({ code: Code.Unauthenticated });
    const key = createPrivateKey({ key: pkcs8FromSeed(identity.key.seed), format: "der", type: "pkcs8" });
    const now = Math.floor(Date.now() / 1000);
    const longLived = await new SignJWT({})
      .setProtectedHeader({ alg: "EdDSA", kid: identity.key.keyId, jwk: publicJwk(identity.key.publicKey) })
      .setIssuer(identity.agentId).setSubject(identity.agentId).setAudience("executor_security").setIssuedAt(now).setExpirationTime(now + 3600)
      .sign(key);
    expect(await refusal(get(longLived))).toMatchObject({ code: Code.Unauthenticated });
    // A valid token of another agent does not see the task.
    const stranger = await issueToken(identity.key, { agentId: identity.agentId, audience: "executor_security" });
    expect(await refusal(get(stranger))).toMatchObject({ code: Code.NotFound });
    // The requester's own token does.
    expect((await get(await client.token())).task?.taskId).toBe(taskId);
  });

  it("refuse a token whose key differs from the agent's pinned key", async () => {
    const client = await connectClient(server);
    const owner = client.agentId;
    await client.submit("text_analysis", { text: "Hi." });
    const impostor = generateKey();
    const token = await issueToken(impostor, { agentId: owner, audience: "executor_security" });
    expect(await refusal(raw.listTasks({}, { headers: { Authorization: `Bearer ${token}` } }))).toMatchObject({ code: Code.Unauthenticated });
  });
});
