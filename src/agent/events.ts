// Live notification of new task events, for Watch streams and for Send
// calls that wait. The store holds the events; this only says "there is
// a new one".
import type { StoredEvent, TaskRecord } from "../store/store.js";

export type EventListener = (event: StoredEvent, task: TaskRecord) => void;

export class TaskEventBus {
  private readonly listeners = new Map<string, Set<EventListener>>();

  subscribe(taskId: string, listener: EventListener): () => void {
    let set = this.listeners.get(taskId);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(taskId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(taskId);
    };
  }

  publish(event: StoredEvent, task: TaskRecord): void {
    for (const listener of this.listeners.get(event.taskId) ?? []) {
      try {
        listener(event, task);
      } catch {
        // A listener's failure is its own; the others still hear the event.
      }
    }
  }
}
