// Every RPC the server hosts, with a valid request to start from: the fuzz
// mutates these, so that hostile bytes reach every layer (framing, parsing,
// signatures, the engine) and not only the first check.
import { create, type DescMessage, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import * as reflectionV1 from "../../gen/grpc/reflection/v1/reflection_pb.js";
import * as reflectionV1alpha from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { CapabilitiesService } from "../../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../../gen/synapse/v1/p2p_pb.js";
import { DecisionAction } from "../../gen/synapse/v1/payloads_pb.js";
import { RegistryService } from "../../gen/synapse/v1/registry_pb.js";
import { ConsensusRule, GroupRole, GroupTaskStrategy } from "../../gen/synapse/v1/a2n_pb.js";
import { GroupService } from "../../gen/synapse/v1/group_pb.js";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { AgentIdentity } from "../../src/agent/identity.js";
import { messageTypeInfo } from "../../src/protocol/message-types.js";

export interface FuzzContext {
  serverUrl: string;
  serverAgentId: string;
  serverKeyId: string;
  /** The caller every valid message and token comes from. */
  requester: AgentIdentity;
  /** A valid bearer token of the requester, for the server. */
  token(): Promise<string>;
  /** A completed task of the requester, and one whose result is a stream. */
  doneTaskId: string;
  streamTaskId: string;
  /** The only ids task_requests use, so that the fuzz creates a bounded number of tasks. */
  taskIds: string[];
  /** A group the requester coordinates at the server, with an open vote "fuzz-vote". */
  groupId: string;
}

export interface EnvelopeSeed {
  type: MessageType;
  payload: Message;
  taskId: string;
}

export interface Target {
  /** "synapse.v1.P2PService/Send" */
  name: string;
  path: string;
  method: DescMethod;
  /** Server-streaming or bidi: Connect frames its body. */
  streaming: boolean;
  /** May stay open (Watch): one message is answer enough. */
  live: boolean;
  /** NO_SIDE_EFFECTS: Connect's GET form is allowed. */
  get: boolean;
  /** Reads with a bearer token. */
  auth: boolean;
  /** The request, without its envelope when it carries one. */
  seed(ctx: FuzzContext, pick: number): Message;
  /** For requests that carry a signed envelope: the message to seal. */
  envelope?(ctx: FuzzContext, pick: number): EnvelopeSeed;
}

const P2P_TYPES = Object.values(MessageType).filter((t): t is MessageType => typeof t === "number" && t !== MessageType.UNSPECIFIED && t < 100);

/** A default payload of the type, naming the task where the payload has a task_id. */
function payloadOf(type: MessageType, taskId: string, ctx: FuzzContext): Message {
  const schema = messageTypeInfo(type)!.payloadSchema;
  const init: Record<string, unknown> = {};
  if (schema.fields.some((f) => f.name === "task_id")) init.taskId = taskId;
  if (type === MessageType.TASK_REQUEST) init.task = { id: taskId, type: "text_analysis", payload: { text: "Fuzz me, gently." } };
  if (type === MessageType.HUMAN_DECISION) init.decision = { action: DecisionAction.APPROVE };
  if (type === MessageType.TASK_INFO_PROVIDED) init.fields = { max_sentences: 1 };
  if (type === MessageType.REGISTRY_REGISTER) {
    init.capabilities = { agentId: ctx.requester.agentId, keyId: ctx.requester.key.keyId, protocolVersion: "1.0.0" };
    init.endpointUrl = ctx.serverUrl; // loopback only: the registry's confirmation call stays on this machine
    init.publicKey = ctx.requester.key.publicKey;
  }
  return create(schema as DescMessage, init as never) as Message;
}

const A2N_TYPES = Object.values(MessageType).filter((t): t is MessageType => typeof t === "number" && t >= 200);

/** An a2n:* message about the fuzz group (ids from small sets, so the fuzz creates a bounded number of things). */
function a2nEnvelope(ctx: FuzzContext, pick: number): EnvelopeSeed {
  const type = A2N_TYPES[pick % A2N_TYPES.length]!;
  const schema = messageTypeInfo(type)!.payloadSchema;
  const id = `fuzz-${pick % 4}`;
  const init: Record<string, unknown> = { groupId: type === MessageType.A2N_GROUP_CREATE ? id : ctx.groupId };
  if (schema.fields.some((f) => f.name === "vote_id")) init.voteId = type === MessageType.A2N_VOTE_START ? id : "fuzz-vote";
  if (type === MessageType.A2N_VOTE_START) Object.assign(init, { question: "?", options: ["a", "b"], rule: ConsensusRule.RANKED, deadline: timestampFromMs(Date.now() + 3_600_000) });
  if (type === MessageType.A2N_VOTE_CAST) init.ranking = ["a"];
  if (type === MessageType.A2N_MEMBER_INVITE) init.invitee = { agentId: `agent_${id}`, keyId: "k" };
  if (type === MessageType.A2N_MEMBER_JOIN) init.role = GroupRole.OBSERVER;
  const taskScoped = messageTypeInfo(type)!.taskScoped;
  if (taskScoped) Object.assign(init, { groupTaskId: id, taskType: "text_analysis", strategy: GroupTaskStrategy.BROADCAST, subtaskId: `${id}.0.1` });
  return { type, payload: create(schema as DescMessage, init as never) as Message, taskId: taskScoped ? id : "" };
}

function p2pEnvelope(ctx: FuzzContext, pick: number): EnvelopeSeed {
  const type = P2P_TYPES[pick % P2P_TYPES.length]!;
  const taskId = type === MessageType.TASK_REQUEST ? ctx.taskIds[pick % ctx.taskIds.length]! : messageTypeInfo(type)!.taskScoped ? ctx.doneTaskId : "";
  return { type, payload: payloadOf(type, taskId, ctx), taskId };
}

const registryEnvelope = (type: MessageType) => (ctx: FuzzContext): EnvelopeSeed => ({ type, payload: payloadOf(type, "", ctx), taskId: "" });

/** Request fields worth starting from, per method; anything else starts empty. */
const SEEDS: Record<string, (ctx: FuzzContext, pick: number) => Record<string, unknown>> = {
  "synapse.v1.CapabilitiesService/GetTaskTypeCapabilities": () => ({ taskType: "text_analysis" }),
  "synapse.v1.CapabilitiesService/Handshake": () => ({ protocolVersion: "1.0.0", interfaces: [{ name: "MessageHandler", version: "1.0.0" }] }),
  "synapse.v1.P2PService/GetTask": (ctx) => ({ taskId: ctx.doneTaskId }),
  "synapse.v1.P2PService/ListTasks": () => ({ pageSize: 5 }),
  "synapse.v1.P2PService/Watch": (ctx, pick) => ({ taskId: ctx.doneTaskId, fromSequence: BigInt(pick % 4) }),
  "synapse.v1.P2PService/ReadResult": (ctx, pick) => ({ taskId: ctx.streamTaskId, offset: BigInt(pick % 3) * 100n }),
  "synapse.v1.RegistryService/GetAgent": (ctx) => ({ agentId: ctx.requester.agentId }),
  "synapse.v1.RegistryService/FindAgents": () => ({ taskType: "text_analysis", pageSize: 3 }),
  "synapse.v1.RegistryService/EvaluateCompliance": () => ({ interfaces: [{ name: "MessageHandler", version: "1.0.0" }] }),
  "synapse.v1.RegistryService/RegisterCapability": (ctx, pick) => ({
    capability: { code: `fuzz.cap${pick % 4}`, name: "fuzz", capabilityType: 2, domain: "fuzz", version: "1.0.0", owner: ctx.requester.agentId, taskType: "text_analysis" },
  }),
  "synapse.v1.RegistryService/GetCapability": (_ctx, pick) => ({ id: `fuzz.cap${pick % 4}` }),
  "synapse.v1.RegistryService/SetCapabilityStatus": (_ctx, pick) => ({ id: `fuzz.cap${pick % 4}`, status: 2, reason: "fuzz" }),
  "synapse.v1.RegistryService/MatchCapabilities": () => ({ ontology: { domain: "fuzz", intent: "analyze" } }),
  "synapse.v1.GroupService/GetGroup": (ctx) => ({ groupId: ctx.groupId }),
  "synapse.v1.GroupService/ListGroups": () => ({ pageSize: 5 }),
  "synapse.v1.GroupService/WatchGroup": (ctx, pick) => ({ groupId: ctx.groupId, fromSequence: BigInt(pick % 4) }),
  "synapse.v1.GroupService/GetGroupTask": (ctx, pick) => ({ groupId: ctx.groupId, groupTaskId: `fuzz-${pick % 4}` }),
  "synapse.v1.GroupService/GetVote": (ctx) => ({ groupId: ctx.groupId, voteId: "fuzz-vote" }),
  "synapse.v1.GroupService/Tally": (ctx) => ({ groupId: ctx.groupId, voteId: "fuzz-vote" }),
  "grpc.health.v1.Health/Check": () => ({ service: "" }),
  "grpc.health.v1.Health/Watch": () => ({ service: "synapse.v1.P2PService" }),
  "grpc.reflection.v1.ServerReflection/ServerReflectionInfo": (_ctx, pick) =>
    pick % 2 ? { messageRequest: { case: "listServices", value: "" } } : { messageRequest: { case: "fileContainingSymbol", value: "synapse.v1.P2PService" } },
  "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": () => ({ messageRequest: { case: "listServices", value: "" } }),
};

const ENVELOPES: Record<string, (ctx: FuzzContext, pick: number) => EnvelopeSeed> = {
  "synapse.v1.P2PService/Send": p2pEnvelope,
  "synapse.v1.RegistryService/Register": registryEnvelope(MessageType.REGISTRY_REGISTER),
  "synapse.v1.RegistryService/Deregister": registryEnvelope(MessageType.REGISTRY_DEREGISTER),
  "synapse.v1.RegistryService/Heartbeat": registryEnvelope(MessageType.HEARTBEAT),
  "synapse.v1.GroupService/Send": a2nEnvelope,
};

const AUTH = new Set(["GetTask", "ListTasks", "Watch", "ReadResult", "RegisterCapability", "SetCapabilityStatus", "GetGroup", "ListGroups", "WatchGroup", "GetGroupTask", "GetVote", "Tally"]);
const LIVE = new Set(["synapse.v1.P2PService/Watch", "grpc.health.v1.Health/Watch", "synapse.v1.GroupService/WatchGroup"]);

/** Every method of the services the server hosts (RegistryService only with a registry). */
export function fuzzTargets(withRegistry: boolean): Target[] {
  const services: DescService[] = [CapabilitiesService, P2PService, GroupService, Health, reflectionV1.ServerReflection, reflectionV1alpha.ServerReflection];
  if (withRegistry) services.push(RegistryService);
  return services.flatMap((service) =>
    service.methods.map((method): Target => {
      const name = `${service.typeName}/${method.name}`;
      const seed = SEEDS[name];
      const envelope = ENVELOPES[name];
      return {
        name,
        path: `/${name}`,
        method,
        streaming: method.methodKind !== "unary",
        live: LIVE.has(name),
        get: method.idempotency === 1,
        auth: AUTH.has(method.name),
        seed: (ctx, pick) => create(method.input, (seed?.(ctx, pick) ?? {}) as never) as Message,
        envelope,
      };
    }),
  );
}
