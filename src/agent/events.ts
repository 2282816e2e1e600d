// Live notification of new task events, for Watch streams, waiting Sends,
// handlers waiting for an answer and the callback outbox. The store holds
// the events and announces each commit (its own, and other instances'
// when shared); this fans those announcements out by task. A change from
// another instance carries no event or task: listeners read the store.
import type { ChangeSource, StoreChange } from "../store/changes.js";
import type { OutboundTask, StoredEvent, TaskRecord } from "../store/store.js";

export interface TaskChange {
  taskId: string;
  sequence: number;
  /** Present when this process committed the change. */
  event?: StoredEvent;
  task?: TaskRecord;
}

export interface OutboundChange {
  executorAgentId: string;
  taskId: string;
  sequence: number;
  event?: StoredEvent;
  task?: OutboundTask;
}

export type EventListener = (change: TaskChange) => void;
export type OutboundListener = (change: OutboundChange) => void;

export class TaskEventBus {
  private readonly listeners = new Map<string, Set<EventListener>>();
  private readonly outboundListeners = new Map<string, Set<OutboundListener>>();
  private readonly stop: () => void;

  constructor(source: ChangeSource) {
    this.stop = source.onChange((change) => this.dispatch(change));
    // A shared store polls what someone waits on, in case a notification is lost.
    source.watchTasks?.(() => this.listeners.keys());
  }

  subscribe(taskId: string, listener: EventListener): () => void {
    return add(this.listeners, taskId, listener);
  }

  subscribeOutbound(executorAgentId: string, taskId: string, listener: OutboundListener): () => void {
    return add(this.outboundListeners, outboundKey(executorAgentId, taskId), listener);
  }

  private dispatch(change: StoreChange): void {
    if (change.kind === "task") {
      for (const listener of this.listeners.get(change.taskId) ?? []) call(listener, change);
    } else {
      for (const listener of this.outboundListeners.get(outboundKey(change.executorAgentId, change.taskId)) ?? []) call(listener, change);
    }
  }

  close(): void {
    this.stop();
  }
}

function outboundKey(executorAgentId: string, taskId: string): string {
  return `${executorAgentId}\u0000${taskId}`;
}

function add<T>(map: Map<string, Set<T>>, key: string, listener: T): () => void {
  let set = map.get(key);
  if (set === undefined) {
    set = new Set();
    map.set(key, set);
  }
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0 && map.get(key) === set) map.delete(key);
  };
}

function call<T>(listener: (change: T) => void, change: T): void {
  try {
    listener(change);
  } catch {
    // A listener's failure is its own; the others still hear the event.
  }
}
