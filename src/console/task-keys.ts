// The console's side of confidential tasks (docs/PROTOCOL.md §9): a task key
// made for each confidential task it requests, wrapped to the executor's
// encryption key (its binding checked against the executor's identity key)
// and to the console's own; kept in memory, and found again from GetTask's
// wrapped keys with the console's X25519 key (another tab, a reload). And
// the one way every executor message is verified here: opened first when it
// is sealed, then checked as any other.
import type { AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import {
  ConfidentialRefusal,
  currentEncryptionKey,
  isSealed,
  newTaskKey,
  openEnvelope,
  openResult,
  unwrapTaskKey,
  wrapTaskKey,
  type ConfidentialSealing,
  type EncryptionKeyPair,
} from "./confidential.js";
import { unverifiedHeader, verifyEnvelope, type Executor, type Expectations, type Verification } from "./envelopes.js";
import type { ConsoleIdentity } from "./keys.js";

export class TaskKeys {
  private readonly keys = new Map<string, Promise<Uint8Array>>();

  constructor(
    private readonly identity: ConsoleIdentity,
    /** Undefined where this browser has no X25519 in WebCrypto: confidential tasks are shown sealed. */
    readonly encryption: EncryptionKeyPair | undefined,
    private readonly getTask: (taskId: string) => Promise<Task>,
  ) {}

  /** Whether this console can take part in confidential tasks. */
  get available(): boolean {
    return this.encryption !== undefined;
  }

  /**
   * A new task key for `taskId`, wrapped to the executor's current
   * encryption key (verified against `executor`'s identity key, never a key
   * the capabilities carry beside it) and to this console's own.
   */
  async forNewTask(taskId: string, executor: Executor, capabilities: AgentCapabilities): Promise<ConfidentialSealing> {
    const own = this.encryption;
    if (own === undefined) throw new ConfidentialRefusal("encryption_key_unknown", "this browser has no X25519 in WebCrypto: it cannot send a confidential task");
    const binding = await currentEncryptionKey(capabilities.encryptionKeys, executor.agentId, executor.publicKey);
    const taskKey = newTaskKey();
    const sender = { agentId: this.identity.agentId, keyId: this.identity.keyId };
    const keys = [
      await wrapTaskKey(taskKey, { taskId, sender, recipient: { agentId: executor.agentId, keyId: binding.keyId } }, binding.publicKey),
      await wrapTaskKey(taskKey, { taskId, sender, recipient: { agentId: this.identity.agentId, keyId: own.keyId } }, own.publicKey),
    ];
    this.keys.set(taskId, Promise.resolve(taskKey));
    return { taskKey, keys };
  }

  /** The task key of a confidential task this console requested: held, or unwrapped from GetTask's `confidential`. */
  keyOf(taskId: string, task?: Task): Promise<Uint8Array> {
    let key = this.keys.get(taskId);
    if (key === undefined) {
      key = this.unwrap(taskId, task);
      this.keys.set(taskId, key);
      // A refusal is not kept: a later GetTask may answer.
      key.catch(() => this.keys.delete(taskId));
    }
    return key;
  }

  private async unwrap(taskId: string, known: Task | undefined): Promise<Uint8Array> {
    const own = this.encryption;
    if (own === undefined) throw new ConfidentialRefusal("encryption_key_unknown", "this browser has no X25519 in WebCrypto: confidential tasks are shown sealed");
    const task = known?.confidential !== undefined ? known : await this.getTask(taskId);
    if (task.confidential === undefined) throw new ConfidentialRefusal("encryption_key_unknown", `task ${taskId} is not confidential`);
    // The wrapped keys name the request's sender; only a task this identity requested is wrapped to it.
    const sender = { agentId: task.requester?.agentId ?? "", keyId: task.requester?.keyId ?? "" };
    return unwrapTaskKey(task.confidential, taskId, sender, this.identity.agentId, own);
  }

  /** Sealing for a further message of a confidential task. */
  async sealingFor(taskId: string): Promise<ConfidentialSealing> {
    return { taskKey: await this.keyOf(taskId) };
  }

  /** A confidential task's result, opened from its sealed records. */
  async openResult(taskId: string, sealed: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
    return openResult(await this.keyOf(taskId), taskId, sealed);
  }
}

/** What an executor message verified as, and the envelope to show: the opened one when it was sealed. */
export interface Checked {
  verification: Verification;
  envelope: Envelope | undefined;
}

/**
 * Verifies an executor message: a sealed one is opened with its task's key
 * (refused with its protocol code when it does not open, or when the inner
 * signature is not the executor's), then checked like any other; a
 * plaintext one on a confidential task is `confidentiality_required`.
 */
export async function verifyMessage(keys: TaskKeys, executor: Executor, envelope: Envelope | undefined, expect: Expectations & { confidential?: boolean }): Promise<Checked> {
  if (!isSealed(envelope)) {
    if (expect.confidential && envelope !== undefined) {
      return { envelope, verification: { ok: false, reason: "confidentiality_required: a plaintext event on a confidential task", header: unverifiedHeader(envelope) } };
    }
    return { envelope, verification: verifyEnvelope(envelope, expect) };
  }
  if (!keys.available) return { envelope, verification: verifyEnvelope(envelope, expect) };
  try {
    const opened = await openEnvelope(envelope!, {
      taskKey: (header) => keys.keyOf(expect.taskId ?? header.taskId),
      signerKey: (header) => (header.sender?.keyId === executor.keyId ? executor.publicKey : undefined),
    });
    const verification = verifyEnvelope(opened.plain, expect);
    return { envelope: opened.plain, verification: verification.ok ? { ...verification, sealed: true } : verification };
  } catch (error) {
    const reason = error instanceof ConfidentialRefusal ? error.message : `encryption_key_unknown: ${error instanceof Error ? error.message : String(error)}`;
    return { envelope, verification: { ok: false, reason, header: unverifiedHeader(envelope) } };
  }
}
