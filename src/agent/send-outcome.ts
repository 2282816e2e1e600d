// What handling one inbound message yields, and the message as it is
// remembered: shared by the engine and the parts it hands messages to.
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { StoredReply, TaskRecord } from "../store/store.js";
import type { MessageCause } from "./message-gate.js";

export interface SendOutcome {
  reply?: StoredReply;
  task?: TaskRecord;
  /** The state of the message's task after it, when there is no TaskRecord (a callback of a task this agent requested). */
  state?: TaskState;
}

/** The inbound message as it will be remembered (its reply is added where it is committed). */
export type Cause = MessageCause;
