// Hostile but validly signed envelopes get typed refusals in every protocol
// and at every RPC that opens envelopes: timestamps outside the Timestamp
// range, message types sent to the wrong service, a receiver key id naming
// another key; and a non-party cannot tell someone else's task from none.
import { create, toBinary, type Message } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HeaderSchema, MessageType, type Envelope, type Header } from "../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { RegistryService } from "../gen/synapse/v1/registry_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { buildHeader, signParts } from "../src/envelope/seal.js";
import { messageTypeInfo } from "../src/protocol/message-types.js";
import { clientFor, PROTOCOLS, refusal } from "./helpers/protocols.js";
import { connectClient, requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

const EXECUTOR = "executor_typed";
let server: TestServer;
let sender: AgentIdentity;

beforeAll(async () => {
  server = await startTestServer({ agentId: EXECUTOR, registry: {} });
  sender = await requesterIdentity();
});
afterAll(() => server.close());

const ALL_TYPES = Object.values(MessageType).filter((v): v is MessageType => typeof v === "number" && v !== MessageType.UNSPECIFIED);

/** A validly signed envelope of `type` (default payload), with the header changed by `edit`. */
function envelopeOf(type: MessageType, edit: (header: Header) => void = () => undefined, taskId = "t-typed"): Envelope {
  const info = messageTypeInfo(type)!;
  const payload = create(info.payloadSchema) as Message;
  const header = buildHeader({ messageType: type, payload, sender: { agentId: sender.agentId }, receiver: { agentId: EXECUTOR }, taskId }, sender.key);
  edit(header);
  return signParts(toBinary(HeaderSchema, header), toBinary(info.payloadSchema, payload), sender.key);
}

/** Every RPC that opens an envelope, with the message type it takes. */
const ENVELOPE_RPCS: Array<{ name: string; type: MessageType; call: (protocol: (typeof PROTOCOLS)[number], envelope: Envelope) => Promise<unknown> }> = [
  { name: "P2PService.Send", type: MessageType.TASK_CANCEL, call: (p, envelope) => clientFor(P2PService, p, server.url).send({ envelope }) },
  { name: "RegistryService.Register", type: MessageType.REGISTRY_REGISTER, call: (p, envelope) => clientFor(RegistryService, p, server.url).register({ envelope }) },
  { name: "RegistryService.Deregister", type: MessageType.REGISTRY_DEREGISTER, call: (p, envelope) => clientFor(RegistryService, p, server.url).deregister({ envelope }) },
  { name: "RegistryService.Heartbeat", type: MessageType.HEARTBEAT, call: (p, envelope) => clientFor(RegistryService, p, server.url).heartbeat({ envelope }) },
];

const MAX_SECONDS = 2n ** 63n - 1n;
const HOSTILE_TIMES: Array<[string, (header: Header) => void]> = [
  ["sent_at +2^63 s", (h) => (h.sentAt!.seconds = MAX_SECONDS)],
  ["sent_at -2^63 s", (h) => (h.sentAt!.seconds = -MAX_SECONDS - 1n)],
  ["sent_at in year 10000", (h) => (h.sentAt!.seconds = 253_402_300_800n)],
  ["sent_at nanos -1", (h) => (h.sentAt!.nanos = -1)],
  ["sent_at nanos 10^9", (h) => (h.sentAt!.nanos = 1_000_000_000)],
  ["expires_at +2^63 s", (h) => (h.expiresAt!.seconds = MAX_SECONDS)],
  ["expires_at -2^63 s", (h) => (h.expiresAt!.seconds = -MAX_SECONDS - 1n)],
  ["expires_at nanos 2^31-1", (h) => (h.expiresAt!.nanos = 2 ** 31 - 1)],
];

describe("timestamps outside the Timestamp range", () => {
  for (const protocol of PROTOCOLS) {
    for (const rpc of ENVELOPE_RPCS) {
      it(`are message_format_invalid: ${rpc.name} over ${protocol.name}`, async () => {
        for (const [name, edit] of HOSTILE_TIMES) {
          const answer = await refusal(rpc.call(protocol, envelopeOf(rpc.type, edit)));
          expect({ name, code: answer.code, protocolCode: answer.protocolCode }).toEqual({ name, code: Code.InvalidArgument, protocolCode: "message_format_invalid" });
        }
      });
    }
  }
});

describe("message types sent to the wrong service", () => {
  for (const protocol of PROTOCOLS) {
    it(`registry:* at P2PService.Send is message_format_invalid over ${protocol.name}`, async () => {
      for (const type of [MessageType.REGISTRY_REGISTER, MessageType.REGISTRY_DEREGISTER]) {
        const answer = await refusal(ENVELOPE_RPCS[0]!.call(protocol, envelopeOf(type)));
        expect({ type, code: answer.code, protocolCode: answer.protocolCode }).toEqual({ type, code: Code.InvalidArgument, protocolCode: "message_format_invalid" });
      }
    });
  }

  it("every type a registry RPC does not take is message_format_invalid there", async () => {
    const protocol = PROTOCOLS[2]!;
    for (const rpc of ENVELOPE_RPCS.slice(1)) {
      for (const type of ALL_TYPES.filter((t) => t !== rpc.type)) {
        const answer = await refusal(rpc.call(protocol, envelopeOf(type)));
        expect({ rpc: rpc.name, type, code: answer.code, protocolCode: answer.protocolCode }).toEqual({ rpc: rpc.name, type, code: Code.InvalidArgument, protocolCode: "message_format_invalid" });
      }
    }
  });
});

describe("receiver.key_id", () => {
  for (const protocol of PROTOCOLS) {
    for (const rpc of ENVELOPE_RPCS) {
      it(`naming another key is wrong_receiver: ${rpc.name} over ${protocol.name}`, async () => {
        const other = await requesterIdentity();
        const answer = await refusal(rpc.call(protocol, envelopeOf(rpc.type, (h) => (h.receiver!.keyId = other.key.keyId))));
        expect(answer).toMatchObject({ code: Code.PermissionDenied, protocolCode: "wrong_receiver" });
        expect(answer.detail?.details).toMatchObject({ key_id: other.key.keyId, expected_key_id: server.capabilities.getCapabilities().keyId });
      });
    }
  }

  it("naming this agent's key, or none, is accepted", async () => {
    const rpc = createClientFor();
    const keyId = server.capabilities.getCapabilities().keyId;
    const pinned = envelopeOf(MessageType.HEARTBEAT, (h) => (h.receiver!.keyId = keyId), "");
    expect((await rpc.send({ envelope: pinned })).reply?.view?.header?.messageType).toBe(MessageType.HEARTBEAT);
    const unpinned = envelopeOf(MessageType.HEARTBEAT, () => undefined, "");
    expect((await rpc.send({ envelope: unpinned })).reply?.view?.header?.messageType).toBe(MessageType.HEARTBEAT);
  });
});

function createClientFor() {
  return clientFor(P2PService, PROTOCOLS[2]!, server.url);
}

describe("someone else's task", () => {
  /** Every message a stranger could send about a task: the requester's words and the executor's. */
  const TASK_TYPES = ALL_TYPES.filter((t) => messageTypeInfo(t)!.taskScoped && t !== MessageType.TASK_REQUEST && t < 100);

  it("answers every message and every read exactly as for a task that does not exist", async () => {
    const owner = await connectClient(server);
    const { taskId } = await owner.submit("summarization", { text: "One. Two. Three." }, { waitMs: 5000 });
    const stranger = await connectClient(server, { identity: sender });
    const headers = { authorization: `Bearer ${await stranger.token()}` };
    const missing = `${taskId}-never`;
    for (const protocol of PROTOCOLS) {
      const p2p = clientFor(P2PService, protocol, server.url);
      const attempts: Array<[string, (id: string) => Promise<unknown> | AsyncIterable<unknown>]> = [
        ...TASK_TYPES.map((type): [string, (id: string) => Promise<unknown>] => [MessageType[type], (id) => p2p.send({ envelope: envelopeOf(type, () => undefined, id) })]),
        ["GetTask", (id) => p2p.getTask({ taskId: id }, { headers })],
        ["Watch", (id) => p2p.watch({ taskId: id }, { headers })],
        ["ReadResult", (id) => p2p.readResult({ taskId: id }, { headers })],
      ];
      for (const [name, attempt] of attempts) {
        const theirs = await refusal(attempt(taskId));
        const none = await refusal(attempt(missing));
        const shape = (r: typeof theirs, id: string) => ({ at: `${name} over ${protocol.name}`, code: r.code, message: r.message.replace(id, "<id>"), detail: r.detail && { ...r.detail, message: r.detail.message.replace(id, "<id>") } });
        expect(shape(theirs, taskId)).toEqual(shape(none, missing));
        expect(theirs).toMatchObject({ code: Code.NotFound, protocolCode: "task_not_found" });
      }
    }
  });
});
