// Live updates for the tasks on screen: a Watch stream per unfinished task,
// each verified event applied to the model. Streams are few: over HTTP/1.1
// a browser opens at most six connections to one server, and each stream
// holds one, so the pool follows at most `max` tasks (those still working
// first, then those waiting for an answer) and leaves the other
// connections to calls. The task open in the detail view has its own stream
// and is left out here.
import { isTerminal, WAITING_STATES } from "../protocol/state-machine.js";
import { verifyMessage } from "./task-keys.js";
import type { Session } from "./rpc.js";
import type { TaskModel } from "./task-model.js";
import { followTask } from "./watch.js";

export const DEFAULT_POOL_STREAMS = 3;
/** How long a task whose stream ended is left before it is followed again. */
const REST_MS = 30_000;

export class WatchPool {
  private readonly wanted = new Map<string, readonly string[]>();
  private readonly streams = new Map<string, AbortController>();
  private excluded: string | undefined;
  /** Streams that ended (or failed) without the model seeing the task end: not reopened for a while. */
  private readonly resting = new Map<string, number>();

  constructor(
    private readonly session: Session,
    private readonly model: TaskModel,
    private readonly max = DEFAULT_POOL_STREAMS,
  ) {}

  /** The tasks a view shows (replacing what that view wanted before). */
  want(view: string, taskIds: readonly string[]): void {
    this.wanted.set(view, taskIds);
    this.rebalance();
  }

  /** A task followed elsewhere (the detail view), or none. */
  exclude(taskId: string | undefined): void {
    this.excluded = taskId;
    this.rebalance();
  }

  /** The tasks followed now (for the page's status line and tests). */
  following(): string[] {
    return [...this.streams.keys()];
  }

  private candidates(): string[] {
    const ids = new Set<string>();
    for (const list of this.wanted.values()) for (const id of list) ids.add(id);
    const open = [...ids].filter((id) => {
      const task = this.model.get(id);
      return id !== this.excluded && task !== undefined && !isTerminal(task.state) && (this.resting.get(id) ?? 0) <= Date.now();
    });
    // Working tasks change by themselves; waiting ones only when someone answers.
    const rank = (id: string) => (WAITING_STATES.has(this.model.get(id)!.state) ? 1 : 0);
    return open.sort((a, b) => rank(a) - rank(b)).slice(0, this.max);
  }

  private rebalance(): void {
    const chosen = new Set(this.candidates());
    for (const [id, controller] of this.streams) {
      if (!chosen.has(id)) {
        controller.abort();
        this.streams.delete(id);
      }
    }
    for (const id of chosen) if (!this.streams.has(id)) this.start(id);
  }

  private start(taskId: string): void {
    const controller = new AbortController();
    this.streams.set(taskId, controller);
    const task = this.model.get(taskId);
    let receiver = task?.requester?.agentId ?? this.session.identity.agentId;
    let confidential = task?.confidential !== undefined;
    // Sealed events are opened before they are applied, one after the other in the order they came.
    let queue: Promise<void> = Promise.resolve();
    const done = () => {
      if (this.streams.get(taskId) === controller) {
        this.resting.set(taskId, Date.now() + REST_MS);
        this.streams.delete(taskId);
        this.rebalance();
      }
    };
    followTask(
      this.session,
      taskId,
      (task?.lastSequence ?? 0n) + 1n,
      {
        snapshot: (snapshot) => {
          receiver = snapshot.requester?.agentId ?? receiver;
          confidential = snapshot.confidential !== undefined;
          this.model.upsert(snapshot);
        },
        event: (sequence, envelope) => {
          const expect = { executor: this.session.executor, receiver, taskId, sequence, confidential };
          queue = queue.then(async () => {
            const { verification: checked } = await verifyMessage(this.session.keys, this.session.executor, envelope, expect);
            // An event that does not verify changes nothing here; the task's history shows it.
            if (checked.ok) this.model.applyEvent(taskId, sequence, checked.header, checked.type, checked.payload);
          });
        },
      },
      controller.signal,
    ).then(done, done);
  }

  /** Ends every stream. */
  close(): void {
    for (const controller of this.streams.values()) controller.abort();
    this.streams.clear();
  }
}
