// A requester's side of confidential tasks (docs/PROTOCOL.md §9): the task
// key made for each confidential task, wrapped to the executor's published
// encryption key (checked against its identity) and to the requester's own,
// kept in memory, and found again from the task's wrapped keys in another
// process; and the task's view rebuilt from its sealed events.
import { create } from "@bufbuild/protobuf";
import type { WrappedKey } from "../../gen/synapse/v1/confidential_pb.js";
import type { AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { MessageType, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { TaskSchema, type Task } from "../../gen/synapse/v1/p2p_pb.js";
import {
  TaskState,
  type TaskCompletePayload,
  type TaskFailedPayload,
  type TaskNeedHumanPayload,
  type TaskNeedInfoPayload,
  type TaskRejectPayload,
  type TaskStatusUpdatePayload,
} from "../../gen/synapse/v1/payloads_pb.js";
import { encryptionKeyOf, EncryptionKeyRing } from "../crypto/encryption-keys.js";
import { generateX25519 } from "../crypto/hpke.js";
import { newTaskKey, openResult, TASK_KEY_BYTES, unwrapTaskKey, wrapTaskKey, type ConfidentialSealing } from "../envelope/confidential.js";
import { currentEncryptionKey } from "../envelope/encryption-binding.js";
import type { ConfidentialKeys } from "../envelope/open.js";
import { clip, protocolError } from "../protocol/errors.js";
import type { VerifiedMessage } from "./requester-types.js";

export class RequesterKeys {
  private readonly keys = new Map<string, Uint8Array>();
  readonly ring: EncryptionKeyRing;

  constructor(
    private readonly me: { agentId: string; keyId: string },
    ring: EncryptionKeyRing | undefined,
  ) {
    // Without keys of its own the requester can read its confidential tasks in this process only.
    this.ring = ring ?? new EncryptionKeyRing(encryptionKeyOf(generateX25519(), Date.now()));
  }

  /** Whether this requester holds the key of the task (it made it, or has read the task). */
  has(taskId: string): boolean {
    return this.keys.has(taskId);
  }

  key(taskId: string): Uint8Array | undefined {
    return this.keys.get(taskId);
  }

  /**
   * A new task key for `taskId`, wrapped to the executor's current
   * encryption key (its binding verified against the executor's identity
   * key) and to this requester's own.
   */
  forNewTask(taskId: string, executor: AgentCapabilities): ConfidentialSealing {
    const binding = currentEncryptionKey(executor.encryptionKeys, executor.agentId, executor.publicKey);
    if (binding === undefined) {
      throw protocolError(ErrorCode.ENCRYPTION_KEY_UNKNOWN, `agent ${clip(executor.agentId)} publishes no encryption key bound to its identity: it takes no confidential tasks`);
    }
    // A key made ahead (its task's files were sealed with it) is the task's.
    const taskKey = this.keys.get(taskId) ?? newTaskKey();
    const wrap = (agentId: string, keyId: string, publicKey: Uint8Array): WrappedKey =>
      wrapTaskKey(taskKey, { taskId, sender: this.me, recipient: { agentId, keyId } }, publicKey);
    const keys = [wrap(executor.agentId, binding.keyId, binding.publicKey), wrap(this.me.agentId, this.ring.current.keyId, this.ring.current.publicKey)];
    this.keys.set(taskId, taskKey);
    return { taskKey, keys };
  }

  /**
   * The key of a task not yet requested, made now (or `given`, one made
   * earlier for it), so that files can be sealed with it before the request.
   */
  ahead(taskId: string, given?: Uint8Array): Uint8Array {
    if (given !== undefined) {
      if (given.byteLength !== TASK_KEY_BYTES) throw protocolError(ErrorCode.INVALID_PARAMS, `a task key is ${TASK_KEY_BYTES} bytes, not ${given.byteLength}`);
      const known = this.keys.get(taskId);
      if (known !== undefined && !Buffer.from(known).equals(given)) throw protocolError(ErrorCode.INVALID_PARAMS, `task ${clip(taskId)} already has another key here`);
      this.keys.set(taskId, new Uint8Array(given));
      return given;
    }
    const known = this.keys.get(taskId);
    if (known !== undefined) return known;
    const key = newTaskKey();
    this.keys.set(taskId, key);
    return key;
  }

  /** Sealing for a further message of a confidential task this requester holds the key of. */
  sealingFor(taskId: string): ConfidentialSealing | undefined {
    const taskKey = this.keys.get(taskId);
    return taskKey === undefined ? undefined : { taskKey };
  }

  /** Learns a task's key from its view's wrapped keys (GetTask), with this requester's own encryption key. */
  learn(task: Task): Uint8Array | undefined {
    if (task.confidential === undefined) return undefined;
    const known = this.keys.get(task.taskId);
    if (known !== undefined) return known;
    const key = unwrapTaskKey(task.confidential, task.taskId, this.me, this.me.agentId, this.ring);
    this.keys.set(task.taskId, key);
    return key;
  }

  /** For open(): the key of the task a confidential message is about, learnt from GetTask when not in memory. */
  opener(getTask: (taskId: string) => Promise<Task>): ConfidentialKeys {
    return {
      taskKey: async (header: Header) => {
        const known = this.keys.get(header.taskId);
        if (known !== undefined) return known;
        const key = this.learn(await getTask(header.taskId));
        if (key === undefined) throw protocolError(ErrorCode.ENCRYPTION_KEY_UNKNOWN, `task ${clip(header.taskId)} is not confidential`);
        return key;
      },
    };
  }

  /** A confidential task's result, opened from its sealed records. */
  openResult(taskId: string, sealed: Uint8Array): Uint8Array {
    const key = this.keys.get(taskId);
    if (key === undefined) throw protocolError(ErrorCode.ENCRYPTION_KEY_UNKNOWN, `no key is known for task ${clip(taskId)}`);
    return openResult(key, taskId, sealed);
  }
}

/** A confidential task's view with what its opened events say (its latest, or more in order): status line, question, decision asked, result, error. */
export function withEventContent(task: Task, events: readonly VerifiedMessage[]): Task {
  const view = create(TaskSchema, task);
  for (const event of events) {
    switch (event.type) {
      case MessageType.TASK_STATUS_UPDATE:
        view.statusMessage = (event.payload as TaskStatusUpdatePayload).message;
        break;
      case MessageType.TASK_NEED_INFO:
        view.pendingInfo = event.payload as TaskNeedInfoPayload;
        break;
      case MessageType.TASK_NEED_HUMAN:
        view.pendingDecision = event.payload as TaskNeedHumanPayload;
        break;
      case MessageType.TASK_COMPLETE: {
        const complete = event.payload as TaskCompletePayload;
        view.result = complete.result;
        view.statusMessage = complete.summary || "completed";
        break;
      }
      case MessageType.TASK_FAILED:
        view.error = (event.payload as TaskFailedPayload).error;
        break;
      case MessageType.TASK_REJECT:
        view.rejection = event.payload as TaskRejectPayload;
        break;
      default:
        break;
    }
  }
  // What is pending is what the current state waits for.
  if (view.state !== TaskState.INFO_NEEDED) view.pendingInfo = undefined;
  if (view.state !== TaskState.NEED_HUMAN && view.state !== TaskState.HUMAN_DECIDING) view.pendingDecision = undefined;
  return view;
}
