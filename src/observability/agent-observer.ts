// What an agent tells whoever observes it (the server's metrics): messages
// taken and signed, state changes, callback pushes, store writes and open
// watches. The
// agent calls these on its hot path, so an observer only counts; with none
// attached each call is a loop over an empty list.
import type { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { TaskRecord } from "../store/store.js";

/** How one callback push ended: acknowledged, failed and to be retried, or given up on. */
export type CallbackOutcome = "delivered" | "retried" | "given_up";

/** The TaskStore writes that are timed. */
export type StoreOperation = "commit" | "create_task";

/** How a timed store write ended: committed, refused by a condition (StoreConflictError, StoreLimitError), or failed. */
export type StoreOutcome = "ok" | "conflict" | "error";

export interface AgentObserver {
  /** A verified message was taken (P2PService.Send, RegistryService). */
  messageReceived(type: MessageType): void;
  /** The agent signed a message and sent it or recorded it: an event (once, however many read it), a reply, a heartbeat. */
  messageSent(type: MessageType): void;
  /** A task's state change was committed; `task` is the task after it. */
  transition(from: TaskState, to: TaskState, task: TaskRecord): void;
  /** One callback push ended. */
  callback(outcome: CallbackOutcome): void;
  /** A store write took `seconds`. */
  storeWrite(operation: StoreOperation, outcome: StoreOutcome, seconds: number): void;
  /** A watch of a task's events (a Watch call, an SSE event stream) started or ended. */
  watchOpened(): void;
  watchClosed(): void;
}

/** Fans every call out to the attached observers. */
export class AgentObservers implements AgentObserver {
  private list: readonly AgentObserver[] = [];

  /** True while no observer is attached: whoever reports may skip measuring. */
  get idle(): boolean {
    return this.list.length === 0;
  }

  /** Attaches an observer; returns the function that detaches it. */
  add(observer: AgentObserver): () => void {
    this.list = [...this.list, observer];
    return () => {
      this.list = this.list.filter((o) => o !== observer);
    };
  }

  messageReceived(type: MessageType): void {
    for (const o of this.list) o.messageReceived(type);
  }

  messageSent(type: MessageType): void {
    for (const o of this.list) o.messageSent(type);
  }

  transition(from: TaskState, to: TaskState, task: TaskRecord): void {
    for (const o of this.list) o.transition(from, to, task);
  }

  callback(outcome: CallbackOutcome): void {
    for (const o of this.list) o.callback(outcome);
  }

  storeWrite(operation: StoreOperation, outcome: StoreOutcome, seconds: number): void {
    for (const o of this.list) o.storeWrite(operation, outcome, seconds);
  }

  watchOpened(): void {
    for (const o of this.list) o.watchOpened();
  }

  watchClosed(): void {
    for (const o of this.list) o.watchClosed();
  }
}
