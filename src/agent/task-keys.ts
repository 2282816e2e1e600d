// The task keys of confidential tasks (docs/PROTOCOL.md §9.2), as this
// executor holds them: unwrapped from a task's request with the agent's
// encryption keys, kept in memory for the tasks in use (never stored), and
// found again from a stored task's wrapped key after a restart. Also the keys
// of confidential tasks this agent requested from others, whose events are
// pushed to it: wrapped to itself in the request it sent.
import type { Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { EncryptionKeyRing } from "../crypto/encryption-keys.js";
import { unwrapRequestKey, unwrapTaskKey } from "../envelope/confidential.js";
import type { ConfidentialKeys } from "../envelope/open.js";
import { clip, protocolError } from "../protocol/errors.js";
import type { OutboundTask, TaskRecord } from "../store/store.js";

/** How many task keys stay in memory; others are unwrapped again when needed (one HPKE open). */
const CACHED_KEYS = 10_000;

export type ConfidentialTask = Pick<TaskRecord, "taskId" | "requester" | "confidential">;

export class TaskKeys {
  private readonly keys = new Map<string, Uint8Array>();
  // A request's key, from opening it until intake has made its task (a request may yet be refused).
  private readonly requests = new WeakMap<Header, Uint8Array>();

  constructor(
    private readonly self: string,
    /** The key id this agent signs with: a request it sent names it as the sender of its wrapped keys. */
    private readonly selfKeyId: string,
    readonly ring: EncryptionKeyRing,
    private readonly now: () => number,
  ) {}

  /** The key of a confidential task, from memory or unwrapped from its record. */
  of(task: ConfidentialTask): Uint8Array {
    const confidential = task.confidential!;
    const id = `${task.taskId}\u0000${confidential.taskKeyId}`;
    const known = this.keys.get(id);
    if (known !== undefined) return known;
    const key = unwrapTaskKey(confidential, task.taskId, task.requester, this.self, this.ring, this.now());
    this.keep(id, key);
    return key;
  }

  /**
   * The key of a confidential task this agent requested from an executor,
   * unwrapped from the request's keys with its own encryption keys (the wrap
   * names this agent as both sender and recipient).
   */
  ofOutbound(task: OutboundTask): Uint8Array {
    const confidential = task.confidential!;
    const id = `out\u0000${task.executorAgentId}\u0000${task.taskId}\u0000${confidential.taskKeyId}`;
    const known = this.keys.get(id);
    if (known !== undefined) return known;
    const key = unwrapTaskKey(confidential, task.taskId, { agentId: this.self, keyId: this.selfKeyId }, this.self, this.ring, this.now());
    this.keep(id, key);
    return key;
  }

  /** Takes the key of a confidential task_request just opened as its task's (unwrapped again if it was opened elsewhere). */
  adopt(header: Header, task: ConfidentialTask): void {
    const key = this.requests.get(header);
    if (key !== undefined) this.keep(`${task.taskId}\u0000${task.confidential!.taskKeyId}`, key);
  }

  private keep(id: string, key: Uint8Array): void {
    if (this.keys.size >= CACHED_KEYS) this.keys.delete(this.keys.keys().next().value!);
    this.keys.set(id, key);
  }

  /**
   * For open(): a request's key from its wrapped keys; any other message's
   * from its task, or, for an event an executor pushes, from the task this
   * agent requested from that executor.
   */
  opener(
    findTask: (taskId: string) => Promise<ConfidentialTask | undefined>,
    findOutbound: (executorAgentId: string, taskId: string) => Promise<OutboundTask | undefined> = async () => undefined,
  ): ConfidentialKeys {
    return {
      taskKey: async (header) => {
        if (header.confidential!.keys.length > 0) {
          const key = unwrapRequestKey(header, this.self, this.ring, this.now());
          this.requests.set(header, key);
          return key;
        }
        const taskKeyId = header.confidential!.taskKeyId;
        const task = await findTask(header.taskId);
        if (task?.confidential === undefined || task.confidential.taskKeyId !== taskKeyId) {
          const outbound = await findOutbound(header.sender?.agentId ?? "", header.taskId);
          if (outbound?.confidential !== undefined && outbound.confidential.taskKeyId === taskKeyId) return this.ofOutbound(outbound);
        }
        if (task?.confidential === undefined || task.confidential.taskKeyId !== header.confidential!.taskKeyId) {
          throw protocolError(ErrorCode.ENCRYPTION_KEY_UNKNOWN, `no confidential task ${clip(header.taskId)} sealed with key ${clip(header.confidential!.taskKeyId)} is known here`);
        }
        return this.of(task);
      },
    };
  }
}
