// The 18 standard interfaces of seed 000 §6.1 as data, and the rule that
// decides which of them this server really implements from what is wired.
// (Seed 000 §6.2 miscounts the basic and complete rows; §6.1 is
// authoritative: 8 basic, 5 complete, 5 advanced.)
import { create } from "@bufbuild/protobuf";
import {
  Compliance,
  ImplementedInterfaceSchema,
  InterfaceCategory,
  type ImplementedInterface,
} from "../../gen/synapse/v1/capabilities_pb.js";

export interface StandardInterface {
  readonly name: string;
  readonly category: InterfaceCategory;
  readonly level: Compliance;
  readonly description: string;
}

const C = InterfaceCategory;
const L = Compliance;

export const STANDARD_INTERFACES: readonly StandardInterface[] = Object.freeze([
  { name: "AgentIdentity", category: C.CORE, level: L.BASIC, description: "Agent id, name and public key; the start of every interaction." },
  { name: "MessageHandler", category: C.CORE, level: L.BASIC, description: "Receives and handles protocol messages from other agents." },
  { name: "CapabilitiesProvider", category: C.CORE, level: L.BASIC, description: "Declares the agent's capabilities for registries and peers." },
  { name: "P2PTaskHandler", category: C.P2P, level: L.BASIC, description: "Accepts, runs and answers point-to-point task requests." },
  { name: "CallbackReceiver", category: C.P2P, level: L.BASIC, description: "An endpoint that receives other agents' asynchronous task results." },
  { name: "CallbackSender", category: C.P2P, level: L.COMPLETE, description: "Pushes task results to the requester's callback endpoint." },
  { name: "TaskStatusProvider", category: C.P2P, level: L.COMPLETE, description: "Answers task status queries by task id (polling)." },
  { name: "GroupTaskHandler", category: C.GROUP, level: L.ADVANCED, description: "Runs subtasks distributed within a group." },
  { name: "GroupManager", category: C.GROUP, level: L.ADVANCED, description: "Creates and dissolves groups and manages their members." },
  { name: "VotingHandler", category: C.GROUP, level: L.ADVANCED, description: "Starts, collects and counts votes." },
  { name: "HILHandler", category: C.HIL, level: L.COMPLETE, description: "Puts decisions to a human and handles approve, reject or modify." },
  { name: "EscalationHandler", category: C.HIL, level: L.ADVANCED, description: "Escalates unresolved human decisions to higher levels." },
  { name: "HTTPTransport", category: C.TRANSPORT, level: L.BASIC, description: "Synchronous request-response over HTTP/HTTPS." },
  { name: "MultipartTransport", category: C.TRANSPORT, level: L.COMPLETE, description: "File upload with multipart/form-data." },
  { name: "HybridTransport", category: C.TRANSPORT, level: L.COMPLETE, description: "Callbacks or streaming first, polling as the fallback." },
  { name: "StreamingTransport", category: C.TRANSPORT, level: L.ADVANCED, description: "Streams data in real time (Server-Sent Events)." },
  { name: "Authenticator", category: C.SECURITY, level: L.BASIC, description: "Signs and verifies messages, issues and checks tokens." },
  { name: "IdempotencyHandler", category: C.SECURITY, level: L.BASIC, description: "Makes task submission and message delivery idempotent." },
]);

const byName = new Map(STANDARD_INTERFACES.map((entry) => [entry.name, entry]));

export function standardInterface(name: string): StandardInterface | undefined {
  return byName.get(name);
}

/** What this server has wired; each implemented interface follows from it. */
export interface Wiring {
  /** CapabilitiesService is served. */
  capabilities: boolean;
  /** P2PService.Send accepts signed task messages and runs tasks. */
  p2p: boolean;
  /** P2PService.GetTask and ListTasks answer. */
  taskStatus: boolean;
  /** Watch and ReadResult stream events and results. */
  streaming: boolean;
  /** Tasks can ask a human to decide. */
  humanInTheLoop: boolean;
  /** Executor events are pushed to a requester's callback endpoint. */
  callbacks: boolean;
  /** GroupService is served: groups, group tasks and votes (A2N). */
  groups?: boolean;
  /** Unanswered human decisions escalate by the task type's policy. */
  escalation?: boolean;
  /** POST /upload takes multipart/form-data files that task requests name. */
  multipart?: boolean;
  /** GET /tasks/{task_id}/events streams a task's events as Server-Sent Events. */
  sse?: boolean;
}

export const INTERFACE_VERSION = "1.0.0";

/** The RPCs (or facts) that provide each interface, given the wiring; undefined when not provided. */
function providedBy(name: string, wiring: Wiring): string[] | undefined {
  switch (name) {
    case "AgentIdentity":
      return wiring.capabilities ? ["synapse.v1.CapabilitiesService/GetCapabilities"] : undefined;
    case "CapabilitiesProvider":
      return wiring.capabilities
        ? ["GetCapabilities", "GetSupportedInterfaces", "GetTaskTypeCapabilities"].map((m) => `synapse.v1.CapabilitiesService/${m}`)
        : undefined;
    case "HTTPTransport":
      return ["HTTP/1.1", "h2c", "h2 over TLS"];
    case "MessageHandler":
    case "P2PTaskHandler":
    case "Authenticator":
    case "IdempotencyHandler":
      return wiring.p2p ? ["synapse.v1.P2PService/Send"] : undefined;
    case "CallbackReceiver":
    case "CallbackSender":
      return wiring.callbacks ? ["synapse.v1.P2PService/Send"] : undefined;
    case "TaskStatusProvider":
      return wiring.taskStatus ? ["synapse.v1.P2PService/GetTask", "synapse.v1.P2PService/ListTasks"] : undefined;
    case "StreamingTransport":
      // The specification names SSE or WebSocket: the claim rests on SSE; the gRPC streams come with it.
      return wiring.sse ? ["GET /tasks/{task_id}/events (Server-Sent Events)", "synapse.v1.P2PService/Watch", "synapse.v1.P2PService/ReadResult"] : undefined;
    case "MultipartTransport":
      return wiring.multipart ? ["POST /upload (multipart/form-data)", "TaskRequestPayload.uploads"] : undefined;
    case "EscalationHandler":
      return wiring.escalation && wiring.humanInTheLoop ? ["p2p:task_need_human (escalation_level, deciders)", "SupportedTaskType.escalation"] : undefined;
    case "HybridTransport":
      return wiring.streaming && wiring.taskStatus ? ["synapse.v1.P2PService/Watch", "synapse.v1.P2PService/GetTask"] : undefined;
    case "HILHandler":
      return wiring.humanInTheLoop ? ["p2p:task_need_human", "p2p:human_decision"] : undefined;
    case "GroupManager":
      return wiring.groups
        ? [
            "synapse.v1.GroupService/Send (a2n:group_create, group_dissolve, member_invite, member_join, member_approve, member_role, member_leave, member_remove)",
            ...["GetGroup", "ListGroups", "WatchGroup"].map((m) => `synapse.v1.GroupService/${m}`),
          ]
        : undefined;
    case "GroupTaskHandler":
      return wiring.groups
        ? ["synapse.v1.GroupService/Send (a2n:group_task_submit, group_task_answer, group_task_cancel)", "synapse.v1.GroupService/GetGroupTask", "synapse.v1.P2PService/Send (sub-tasks at the members)"]
        : undefined;
    case "VotingHandler":
      return wiring.groups
        ? ["synapse.v1.GroupService/Send (a2n:vote_start, vote_cast, vote_close)", "synapse.v1.GroupService/GetVote", "synapse.v1.GroupService/Tally"]
        : undefined;
    default:
      return undefined;
  }
}

export function implementedInterfaces(wiring: Wiring): ImplementedInterface[] {
  const out: ImplementedInterface[] = [];
  for (const entry of STANDARD_INTERFACES) {
    const via = providedBy(entry.name, wiring);
    if (via === undefined) continue;
    out.push(
      create(ImplementedInterfaceSchema, {
        name: entry.name,
        category: entry.category,
        complianceLevel: entry.level,
        version: INTERFACE_VERSION,
        description: entry.description,
        metadata: { provided_by: via },
      }),
    );
  }
  return out;
}
