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

/** Listeners of one task told at once, in the commit's own turn; more go in later turns. */
const TOLD_AT_ONCE = 64;
/** Listeners told per later turn of the event loop. */
const TOLD_PER_TURN = 512;
/** Waiters for a settled task woken per turn (see wakeSettled). */
const WOKEN_PER_TURN = 256;

/** A change still to be told to some of the listeners it had when it was committed. */
interface Telling {
  listeners: EventListener[];
  current: Set<EventListener>;
  change: TaskChange;
  told: number;
}

/**
 * Fans store changes out by task. A task with many listeners (thousands of
 * Watch streams, say) is told over several turns of the event loop, so the
 * call that committed the change, and every other request, goes on without
 * waiting for the fan-out. Every listener still hears every change of its
 * task in commit order: while any telling is under way, later changes queue
 * behind it.
 */
export class TaskEventBus {
  private readonly listeners = new Map<string, Set<EventListener>>();
  private readonly outboundListeners = new Map<string, Set<OutboundListener>>();
  private readonly backlog: Telling[] = [];
  /** Who waits for a task's tellings to finish (see settled). */
  private readonly settledWaiters = new Map<string, Array<() => void>>();
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

  /**
   * Resolves once every change of the task committed so far has been told
   * to all its listeners. A Watch stream that has sent a task's last event
   * waits for this before it ends, so that ending thousands of streams (their
   * trailers, their close) does not hold up the others' event.
   */
  settled(taskId: string): Promise<void> {
    if (!this.telling(taskId)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.settledWaiters.get(taskId);
      if (waiters === undefined) this.settledWaiters.set(taskId, [resolve]);
      else waiters.push(resolve);
    });
  }

  private dispatch(change: StoreChange): void {
    if (change.kind === "task") {
      const current = this.listeners.get(change.taskId);
      if (current === undefined) return;
      if (this.backlog.length === 0 && current.size <= TOLD_AT_ONCE) {
        for (const listener of current) call(listener, change);
        return;
      }
      this.backlog.push({ listeners: [...current], current, change, told: 0 });
      if (this.backlog.length === 1) setImmediate(this.tell);
    } else {
      for (const listener of this.outboundListeners.get(outboundKey(change.executorAgentId, change.taskId)) ?? []) call(listener, change);
    }
  }

  /** Tells the next listeners in the backlog, and comes back next turn while any are left. */
  private readonly tell = (): void => {
    let budget = TOLD_PER_TURN;
    while (budget > 0 && this.backlog.length > 0) {
      const telling = this.backlog[0]!;
      while (budget > 0 && telling.told < telling.listeners.length) {
        const listener = telling.listeners[telling.told++]!;
        // One that unsubscribed meanwhile has stopped listening.
        if (telling.current.has(listener)) call(listener, telling.change);
        budget--;
      }
      if (telling.told === telling.listeners.length) {
        this.backlog.shift();
        // Next turn: the event's last frames go out to the sockets before thousands of streams end.
        const taskId = telling.change.taskId;
        if (this.settledWaiters.has(taskId)) setImmediate(() => this.wakeSettled(taskId));
      }
    }
    if (this.backlog.length > 0) setImmediate(this.tell);
  };

  /** Whether a change of the task is still being told. */
  private telling(taskId: string): boolean {
    return this.backlog.some((telling) => telling.change.taskId === taskId);
  }

  /**
   * Wakes those waiting for the task's tellings, a slice per turn: each
   * wakes a stream that then ends, and ending thousands in one turn would
   * keep the event loop from the sockets (their flow-control updates, their
   * writes) for that long.
   */
  private wakeSettled(taskId: string): void {
    const waiters = this.settledWaiters.get(taskId);
    if (waiters === undefined || this.telling(taskId)) return;
    const now = waiters.splice(0, WOKEN_PER_TURN);
    if (waiters.length === 0) this.settledWaiters.delete(taskId);
    else setImmediate(() => this.wakeSettled(taskId));
    for (const resolve of now) resolve();
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
