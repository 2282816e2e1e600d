// Listening to a signal that many calls share (the server's shutdown, the
// agent's draining). An AbortSignal is an EventTarget, and Node looks through
// all of a target's listeners on every addEventListener (for duplicates) and
// removeEventListener: with 10,000 open Watch streams each adding its own
// listener to the shutdown signal, opening them spent an eighth of its CPU
// there. Here each shared signal has one listener, which tells a Set.
const listeners = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Something that aborts once, listened to without an EventTarget: a call on
 * the server's short path offers one beside its AbortSignal (see
 * short-call.ts), since listening to a call's AbortSignal costs more than the
 * rest of waiting for a task.
 */
export interface Abortable {
  readonly aborted: boolean;
  /** Calls `listener` once when it aborts (never when already aborted); the returned function stops listening. */
  listen(listener: () => void): () => void;
}

/** Calls `listener` once when `signal` aborts (at once if it has); the returned function stops listening. */
export function onAbort(signal: AbortSignal | Abortable, listener: () => void): () => void {
  if (!(signal instanceof AbortSignal)) {
    if (!signal.aborted) return signal.listen(listener);
    listener();
    return () => undefined;
  }
  if (signal.aborted) {
    listener();
    return () => undefined;
  }
  let set = listeners.get(signal);
  if (set === undefined) {
    const created = new Set<() => void>();
    set = created;
    listeners.set(signal, created);
    signal.addEventListener(
      "abort",
      () => {
        listeners.delete(signal);
        for (const told of created) told();
      },
      { once: true },
    );
  }
  const held = set;
  held.add(listener);
  return () => held.delete(listener);
}

/** A signal of its own that aborts when any of `sources` does; `release` stops listening to them (call it when done). */
export function linkedSignal(...sources: AbortSignal[]): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  const stops = sources.map((source) => onAbort(source, () => controller.abort(source.reason)));
  return { signal: controller.signal, release: () => stops.forEach((stop) => stop()) };
}
