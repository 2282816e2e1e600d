// CallbackSender: pushes every event of a task whose request named a
// callback_url to that agent's P2PService.Send, in sequence order, each as
// the same signed envelope. What is still to push lives in the store's
// callback outbox (next sequence, attempts, next attempt time), so pushes
// survive a restart and one instance of several does each task's pushes.
// Transient failures are retried with exponential backoff (P2PConfig
// max_retries and retry_base_delay); a refusal or an exhausted budget gives
// up on that task, which stays readable by Watch and GetTask. Each push
// goes out in the trace its event carries (the task's), with that trace's
// context in its HTTP headers when a tracer is installed.
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { P2PService } from "../../gen/synapse/v1/p2p_pb.js";
import type { Logger } from "../log.js";
import type { AgentObserver } from "../observability/agent-observer.js";
import { eventLogFields } from "../observability/log-fields.js";
import { delivering } from "../observability/spans.js";
import { createOutboundTransport } from "../net/outbound-client.js";
import type { OutboundPolicy } from "../net/outbound-policy.js";
import { isTerminal } from "../protocol/state-machine.js";
import { DeliveryStatus, type DeliveryRecord, type StoredEvent, type TaskStore } from "../store/store.js";
import { CallbackClients } from "./callback-clients.js";
import type { TaskEventBus } from "./events.js";

const TRANSIENT = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Internal, Code.Unknown, Code.ResourceExhausted, Code.Aborted]);
const CLAIM_BATCH = 50;

export interface CallbackOptions {
  store: TaskStore;
  bus: TaskEventBus;
  logger: Logger;
  /** Where callbacks may go (checked again, resolved, on every connection). */
  outbound: OutboundPolicy;
  maxRetries: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs?: number;
  /** Per-attempt deadline. */
  timeoutMs?: number;
  /** This instance, as named in the outbox entries it holds. */
  instanceId: string;
  /** How long a held entry stays this instance's unless renewed. */
  leaseMs: number;
  now?: () => number;
  /** Told how each push ended. */
  observer?: Pick<AgentObserver, "callback">;
}

interface Held {
  record: DeliveryRecord;
  /** Until when this instance surely holds the entry: the last claim or renewal that the store confirmed. */
  heldUntilMs: number;
  running: boolean;
  /** Something new happened while a pass was running: run another. */
  again: boolean;
  retry?: NodeJS.Timeout;
  unsubscribe: () => void;
}

export class CallbackSender {
  private readonly held = new Map<string, Held>();
  private readonly clients: CallbackClients<{ client: Client<typeof P2PService>; close(): void }>;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: CallbackOptions) {
    this.now = options.now ?? Date.now;
    this.clients = new CallbackClients((url) => {
      const { outbound: policy, logger } = this.options;
      const transport = createOutboundTransport(url, { policy, logger, purpose: "callback", keepAlive: true });
      return { client: createClient(P2PService, transport), close: () => transport.close() };
    });
  }

  /**
   * Takes up the outbox: at start (entries held by an instance that is gone
   * are taken too, when the store is this process's alone), then every
   * third of a lease: renewing what it holds, taking what is due.
   */
  async start(): Promise<void> {
    await this.claim(undefined, this.options.store.exclusive);
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.floor(this.options.leaseMs / 3)));
    this.timer.unref();
  }

  /** A task with a callback_url was created: start pushing its events now. */
  track(taskId: string): void {
    if (!this.closed && !this.held.has(taskId)) void this.claim(taskId, false);
  }

  private async tick(): Promise<void> {
    try {
      const ids = [...this.held.keys()];
      const until = this.until();
      const kept = new Set(await this.options.store.renewDeliveries(this.options.instanceId, ids, until));
      for (const id of ids) {
        const entry = this.held.get(id);
        if (!kept.has(id)) this.drop(id);
        else if (entry !== undefined) entry.heldUntilMs = until;
      }
      await this.claim(undefined, false);
    } catch (error) {
      this.options.logger.warn({ err: error }, "the callback outbox could not be read");
    }
  }

  private until(): number {
    return this.now() + this.options.leaseMs;
  }

  private async claim(taskId: string | undefined, force: boolean): Promise<void> {
    if (this.closed) return;
    const nowMs = force ? Number.MAX_SAFE_INTEGER : this.now();
    let claimed: DeliveryRecord[];
    try {
      claimed = await this.options.store.claimDeliveries(this.options.instanceId, nowMs, this.until(), CLAIM_BATCH, taskId);
    } catch (error) {
      this.options.logger.warn({ err: error, task_id: taskId }, "could not claim callback deliveries");
      return;
    }
    for (const record of claimed) this.hold(record);
  }

  private hold(record: DeliveryRecord): void {
    const existing = this.held.get(record.taskId);
    if (existing !== undefined) {
      existing.record = record;
      existing.heldUntilMs = record.ownerUntilMs;
      this.pump(existing);
      return;
    }
    const entry: Held = { record, heldUntilMs: record.ownerUntilMs, running: false, again: false, unsubscribe: () => undefined };
    entry.unsubscribe = this.options.bus.subscribe(record.taskId, () => this.pump(entry));
    this.held.set(record.taskId, entry);
    this.pump(entry);
  }

  private drop(taskId: string): void {
    const entry = this.held.get(taskId);
    if (entry === undefined) return;
    clearTimeout(entry.retry);
    entry.unsubscribe();
    this.held.delete(taskId);
  }

  /** Stops every push (at shutdown) and gives the entries back, so another instance or a restart carries on. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    const ids = [...this.held.keys()];
    for (const id of ids) this.drop(id);
    await Promise.all(ids.map((id) => this.options.store.updateDelivery(id, this.options.instanceId, { release: true }).catch(() => false)));
    this.clients.closeAll();
  }

  private client(url: string): Client<typeof P2PService> {
    return this.clients.get(url, () => new Set([...this.held.values()].map((entry) => entry.record.url))).client;
  }

  private pump(entry: Held): void {
    if (entry.running) {
      entry.again = true;
      return;
    }
    if (entry.retry !== undefined || this.closed) return; // waiting out a backoff
    entry.running = true;
    entry.again = false;
    this.deliverPending(entry)
      .catch((error: unknown) => this.options.logger.warn({ err: error, task_id: entry.record.taskId }, "callback delivery failed"))
      .finally(() => {
        entry.running = false;
        if (entry.again && this.held.get(entry.record.taskId) === entry) this.pump(entry);
      });
  }

  private async deliverPending(entry: Held): Promise<void> {
    const { store, instanceId } = this.options;
    const taskId = entry.record.taskId;
    for (;;) {
      if (this.closed || this.held.get(taskId) !== entry) return;
      const events = await store.listEvents(taskId, entry.record.nextSequence);
      if (events.length === 0) {
        const task = await store.getTask(taskId);
        if (task === undefined || (isTerminal(task.state) && entry.record.nextSequence > task.lastSequence)) {
          await store.updateDelivery(taskId, instanceId, { status: DeliveryStatus.DONE, release: true });
          this.drop(taskId);
        }
        return;
      }
      for (const event of events) {
        // Renewals failed (the store unreachable) until the hold lapsed: another instance may have the entry by now.
        // Let the next claim decide who pushes, from the sequence the store records.
        if (this.now() >= entry.heldUntilMs) return this.drop(taskId);
        const outcome = await this.deliver(entry, event);
        if (outcome === "sent") {
          const next = event.sequence + 1;
          // Recorded before the next push: a receiver that acknowledged an event never gets it again from us.
          if (!(await store.updateDelivery(taskId, instanceId, { nextSequence: next, attempts: 0, lastError: "" }))) return this.drop(taskId);
          entry.record = { ...entry.record, nextSequence: next, attempts: 0, lastError: "" };
          continue;
        }
        return;
      }
    }
  }

  /** One push; on a transient failure schedules the retry, on a refusal or an exhausted budget gives up. */
  private async deliver(entry: Held, event: StoredEvent): Promise<"sent" | "later" | "given_up"> {
    const { maxRetries, retryBaseDelayMs, retryMaxDelayMs = Infinity, timeoutMs = 10_000, store, instanceId, logger, observer } = this.options;
    const { taskId, url, attempts } = entry.record;
    try {
      await delivering(event.header, url, (headers) => this.client(url).send({ envelope: event.envelope }, { timeoutMs, headers }));
      observer?.callback("delivered");
      return "sent";
    } catch (error) {
      const connectError = ConnectError.from(error);
      const lastError = `${Code[connectError.code]}: ${connectError.rawMessage}`.slice(0, 500);
      if (!TRANSIENT.has(connectError.code) || attempts >= maxRetries) {
        observer?.callback("given_up");
        logger.warn(
          { ...eventLogFields(event), callback_url: url, code: Code[connectError.code], attempts: attempts + 1, error: connectError.rawMessage },
          "giving up on the callback endpoint for this task",
        );
        await store.updateDelivery(taskId, instanceId, { status: DeliveryStatus.GIVEN_UP, attempts: attempts + 1, lastError, release: true });
        this.drop(taskId);
        return "given_up";
      }
      observer?.callback("retried");
      logger.debug({ ...eventLogFields(event), callback_url: url, code: Code[connectError.code], attempts: attempts + 1, error: connectError.rawMessage }, "callback push failed; retrying");
      const delay = Math.min(retryBaseDelayMs * 2 ** attempts, retryMaxDelayMs);
      const record = { ...entry.record, attempts: attempts + 1, nextAttemptAtMs: this.now() + delay, lastError };
      if (!(await store.updateDelivery(taskId, instanceId, { attempts: record.attempts, nextAttemptAtMs: record.nextAttemptAtMs, lastError }))) {
        this.drop(taskId);
        return "later";
      }
      entry.record = record;
      entry.retry = setTimeout(() => {
        entry.retry = undefined;
        this.pump(entry);
      }, delay);
      entry.retry.unref();
      return "later";
    }
  }
}
