// CallbackSender: pushes every event of a task whose request named a
// callback_url to that agent's P2PService.Send, in sequence order, each as
// the same signed envelope. Transient failures are retried with exponential
// backoff (P2PConfig max_retries and retry_base_delay); a refusal or an
// exhausted budget stops the pushes for that task, which stays readable by
// Watch and GetTask.
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../../gen/synapse/v1/p2p_pb.js";
import type { Logger } from "../log.js";
import { createOutboundTransport } from "../net/outbound-client.js";
import type { OutboundPolicy } from "../net/outbound-policy.js";
import { isTerminal } from "../protocol/state-machine.js";
import type { Store } from "../store/store.js";
import type { TaskEventBus } from "./events.js";

const TRANSIENT = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Internal, Code.Unknown, Code.ResourceExhausted, Code.Aborted]);

export interface CallbackOptions {
  store: Store;
  bus: TaskEventBus;
  logger: Logger;
  /** Where callbacks may go (checked again, resolved, on every connection). */
  outbound: OutboundPolicy;
  maxRetries: number;
  retryBaseDelayMs: number;
  /** Per-attempt deadline. */
  timeoutMs?: number;
}

interface Delivery {
  url: string;
  next: number;
  running: boolean;
  stopped: boolean;
  unsubscribe: () => void;
}

export class CallbackSender {
  private readonly deliveries = new Map<string, Delivery>();
  private readonly clients = new Map<string, Client<typeof P2PService>>();
  private closed = false;

  constructor(private readonly options: CallbackOptions) {}

  /** Starts pushing the task's events (from sequence 1) to `url`. */
  track(taskId: string, url: string): void {
    if (this.deliveries.has(taskId) || this.closed) return;
    const delivery: Delivery = { url, next: 1, running: false, stopped: false, unsubscribe: () => undefined };
    delivery.unsubscribe = this.options.bus.subscribe(taskId, () => this.pump(taskId, delivery));
    this.deliveries.set(taskId, delivery);
    this.pump(taskId, delivery);
  }

  /** Stops every delivery (at shutdown). */
  close(): void {
    this.closed = true;
    for (const delivery of this.deliveries.values()) {
      delivery.stopped = true;
      delivery.unsubscribe();
    }
    this.deliveries.clear();
  }

  private client(url: string): Client<typeof P2PService> {
    let client = this.clients.get(url);
    if (client === undefined) {
      const { outbound: policy, logger } = this.options;
      client = createClient(P2PService, createOutboundTransport(url, { policy, logger, purpose: "callback", keepAlive: true }));
      this.clients.set(url, client);
    }
    return client;
  }

  private pump(taskId: string, delivery: Delivery): void {
    if (delivery.running || delivery.stopped) return;
    delivery.running = true;
    this.deliverPending(taskId, delivery)
      .catch((error: unknown) => this.options.logger.warn({ err: error, task_id: taskId }, "callback delivery failed"))
      .finally(() => {
        delivery.running = false;
      });
  }

  private async deliverPending(taskId: string, delivery: Delivery): Promise<void> {
    for (;;) {
      if (delivery.stopped) return;
      const events = await this.options.store.listEvents(taskId, delivery.next);
      if (events.length === 0) {
        const task = await this.options.store.getTask(taskId);
        if (task === undefined || (isTerminal(task.state) && delivery.next > task.lastSequence)) this.finish(taskId, delivery);
        return;
      }
      for (const event of events) {
        if (!(await this.deliver(taskId, delivery, event.envelope))) {
          this.finish(taskId, delivery);
          return;
        }
        delivery.next = event.sequence + 1;
      }
    }
  }

  /** One event, with retries; false when the callback endpoint is given up on. */
  private async deliver(taskId: string, delivery: Delivery, envelope: Envelope): Promise<boolean> {
    const { maxRetries, retryBaseDelayMs, timeoutMs = 10_000 } = this.options;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.client(delivery.url).send({ envelope }, { timeoutMs });
        return true;
      } catch (error) {
        const connectError = ConnectError.from(error);
        if (!TRANSIENT.has(connectError.code) || attempt >= maxRetries || delivery.stopped) {
          this.options.logger.warn(
            { task_id: taskId, callback_url: delivery.url, code: Code[connectError.code], attempts: attempt + 1, error: connectError.rawMessage },
            "giving up on the callback endpoint for this task",
          );
          return false;
        }
        await new Promise((resolve) => setTimeout(resolve, retryBaseDelayMs * 2 ** attempt));
      }
    }
  }

  private finish(taskId: string, delivery: Delivery): void {
    delivery.stopped = true;
    delivery.unsubscribe();
    this.deliveries.delete(taskId);
  }
}
