// CallbackReceiver: the events of tasks this agent requested from others,
// pushed to its P2PService.Send by their executors. Each arrives verified
// (signature, sender, receiver); here it must be the next in sequence and a
// legal step of the state machine, and is kept in the store.
import { create } from "@bufbuild/protobuf";
import type { Confidentiality } from "../../gen/synapse/v1/confidential_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { AckPayloadSchema, TaskState, type AckPayload } from "../../gen/synapse/v1/payloads_pb.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { protocolError } from "../protocol/errors.js";
import { stateAfterEvent } from "../protocol/event-state.js";
import { isTerminal, stateName } from "../protocol/state-machine.js";
import { StoreConflictError, type OutboundTask, type StoredEvent, type TaskStore } from "../store/store.js";
import type { TaskEventBus } from "./events.js";

/** One event pushed back by an executor, verified and kept. */
export interface InboxEvent {
  /** The signed event. */
  event: StoredEvent;
  /** The task's state after it. */
  state: TaskState;
}

/** The executor a requester chose (by URL) and the key it declared there. */
export interface ExpectedExecutor {
  /** The executor's agent id. */
  agentId: string;
  /** The key id it declared. */
  keyId: string;
  /** The public key it declared. */
  publicKey: Uint8Array;
}

/**
 * An agent's CallbackReceiver: the events of tasks it requested from other
 * agents, pushed to it by their executors (callbacks). Each arrives verified
 * (signature, sender, receiver), must be the next in sequence and a legal
 * step of the state machine, and is kept in the agent's store. A
 * `SynapseClient` connected with `callback: { url, inbox }` asks executors to
 * push here; read what arrives with {@link CallbackInbox.events}.
 */
export class CallbackInbox {
  /** @internal */
  constructor(
    private readonly store: TaskStore,
    private readonly bus: TaskEventBus,
    private readonly trust: TrustPolicy,
  ) {}

  /**
   * Expects the events of a task this agent is about to request from the
   * executor. The agent vouches for the executor's key, so that its pushes
   * are trusted even when its id is not self-certifying. For a confidential
   * task, `confidential` is its request's (the task key wrapped to each
   * party, one of them to this agent): the pushed events open with it.
   */
  async expect(executor: ExpectedExecutor, taskId: string, confidential?: Confidentiality): Promise<void> {
    await this.trust.vouch?.(executor.agentId, executor.keyId, executor.publicKey);
    await this.store.expectOutbound({ taskId, executorAgentId: executor.agentId, state: TaskState.PENDING, lastSequence: 0, ...(confidential === undefined ? {} : { confidential }) });
  }

  /** @internal */
  async get(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined> {
    return this.store.getOutbound(executorAgentId, taskId);
  }

  /**
   * Whether a message from an executor is a callback this agent expects.
   * @internal
   */
  async expects(opened: OpenedEnvelope): Promise<boolean> {
    return (await this.store.getOutbound(opened.header.sender!.agentId, opened.header.taskId)) !== undefined;
  }

  /**
   * Takes one pushed event; returns the p2p:ack payload to answer with and
   * the task's state as this agent knows it now.
   * @internal
   */
  async receive(opened: OpenedEnvelope): Promise<{ ack: AckPayload; state: TaskState }> {
    const executor = opened.header.sender!.agentId;
    const taskId = opened.header.taskId;
    const sequence = Number(opened.header.sequence);
    const task = await this.store.getOutbound(executor, taskId);
    if (task === undefined) throw protocolError(ErrorCode.TASK_NOT_FOUND, `this agent requested no task ${taskId} from ${executor}`);
    const ack = create(AckPayloadSchema, { acknowledgedMessageId: opened.header.messageId, message: `event ${sequence} received` });
    if (sequence >= 1 && sequence <= task.lastSequence) return { ack, state: task.state }; // delivered again: already kept
    if (sequence !== task.lastSequence + 1) {
      throw protocolError(ErrorCode.ILLEGAL_TRANSITION, `expected event ${task.lastSequence + 1} of task ${taskId}, got ${sequence}`, {
        details: { expected_sequence: task.lastSequence + 1 },
      });
    }
    const next = stateAfterEvent(task.state, opened.header.messageType, opened.payload);
    if (next === undefined) {
      throw protocolError(ErrorCode.ILLEGAL_TRANSITION, `${opened.info.wireName} is not allowed while task ${taskId} is ${stateName(task.state)}`);
    }
    const event: StoredEvent = { taskId, sequence, envelope: opened.envelope, header: opened.header, payload: opened.payload };
    try {
      await this.store.appendOutboundEvent(executor, event, next);
    } catch (error) {
      if (error instanceof StoreConflictError) return { ack, state: next }; // a concurrent delivery of the same event won
      throw error;
    }
    return { ack, state: next };
  }

  /**
   * Every event of the task as it arrives (from the first), ending after the
   * terminal one. Events are read from the store; the bus only says when to
   * look, so events kept by another instance count too.
   */
  async *events(executorAgentId: string, taskId: string, signal?: AbortSignal): AsyncGenerator<InboxEvent> {
    let changed = true;
    let wake: (() => void) | undefined;
    const unsubscribe = this.bus.subscribeOutbound(executorAgentId, taskId, () => {
      changed = true;
      wake?.();
    });
    const onAbort = () => wake?.();
    signal?.addEventListener("abort", onAbort);
    try {
      let next = 1;
      let state = TaskState.PENDING;
      while (!signal?.aborted) {
        changed = false;
        for (const event of await this.store.listOutboundEvents(executorAgentId, taskId, next)) {
          state = stateAfterEvent(state, event.header.messageType, event.payload) ?? state;
          yield { event, state };
          next = event.sequence + 1;
          if (isTerminal(state)) return;
        }
        if (changed) continue;
        await new Promise<void>((resolve) => {
          wake = resolve;
          if (changed || signal?.aborted) resolve();
        });
        wake = undefined;
      }
    } finally {
      unsubscribe();
      signal?.removeEventListener("abort", onAbort);
    }
  }
}
