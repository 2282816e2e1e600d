// What changed in a store, as it happens: the event bus, Watch streams,
// waiting Sends, handlers waiting for answers and the callback outbox all
// learn of new events here. A change carries the event and task when this
// process committed them; a change committed by another process sharing
// the store carries only ids, and readers look in the store.
import type { ChangeListener, ChangeSource, StoreChange } from "./store.js";

export type { ChangeListener, ChangeSource, StoreChange } from "./store.js";

/** Fans changes out to listeners; one listener's failure is its own. */
export class ChangeEmitter implements ChangeSource {
  private readonly listeners = new Set<ChangeListener>();

  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(change: StoreChange): void {
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch {
        // The others still hear it.
      }
    }
  }
}
