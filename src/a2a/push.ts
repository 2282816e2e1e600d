// A2A push notifications: every StreamResponse a task's events make (the
// same status and artifact updates a stream shows) POSTed as JSON to each
// of the task's webhooks, in order. What each webhook has received is kept
// in the store (its delivered sequence), so delivery resumes after a
// restart where it stopped; a failed POST is retried with exponential
// backoff (P2PConfig max_retries, retry_base_delay); a refusal (4xx) or an
// exhausted budget gives up on that webhook. Connections go through the
// outbound address policy, as callbacks do.
import { toJson } from "@bufbuild/protobuf";
import http from "node:http";
import https from "node:https";
import { StreamResponseSchema, type StreamResponse } from "../../gen/lf/a2a/v1/a2a_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { DEFAULT_LEASE_MS, type Agent } from "../agent/agent.js";
import type { Logger } from "../log.js";
import { OutboundRefusal } from "../net/outbound-policy.js";
import { pinnedConnection, type DialOptions } from "../net/pinned-connection.js";
import { isTerminal } from "../protocol/state-machine.js";
import type { A2APushStore, PushConfigRecord } from "../store/a2a-push.js";
import type { ConvertContext } from "./convert.js";
import { eventUpdates } from "./stream.js";

/** The header carrying a config's token, as A2A clients expect it. */
export const NOTIFICATION_TOKEN_HEADER = "X-A2A-Notification-Token";
const POST_TIMEOUT_MS = 10_000;
const CLAIM_BATCH = 100;

interface Held {
  config: PushConfigRecord;
  running: boolean;
  again: boolean;
  retry?: NodeJS.Timeout;
}

const key = (config: Pick<PushConfigRecord, "taskId" | "configId">) => `${config.taskId}\n${config.configId}`;

class PushFailure extends Error {
  constructor(
    message: string,
    readonly transient: boolean,
  ) {
    super(message);
  }
}

export class A2APushSender {
  private readonly held = new Map<string, Held>();
  private stopListening: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly agent: Agent,
    private readonly store: A2APushStore,
    private readonly convert: ConvertContext,
    private readonly logger: Logger,
    private readonly leaseMs = DEFAULT_LEASE_MS,
  ) {}

  /** The instance whose leases this sender holds. */
  get owner(): string {
    return this.agent.instanceId;
  }

  /** Until when a lease taken now holds. */
  leaseUntil(): number {
    return Date.now() + this.leaseMs;
  }

  /**
   * Takes up every webhook still owed notifications that no live instance
   * holds (after a restart, say), then every third of a lease renews what it
   * holds and takes over what a dead instance held.
   */
  async start(): Promise<void> {
    // Every commit to a task with webhooks wakes their delivery (commits of other instances too, on a shared store).
    this.stopListening = this.agent.store.onChange((change) => {
      if (change.kind !== "task") return;
      for (const entry of this.held.values()) if (entry.config.taskId === change.taskId) this.pump(entry);
    });
    // A store this process has alone: whatever an earlier run held is this run's at once.
    await this.claim(this.agent.store.exclusive === true);
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
  }

  private async claim(force = false): Promise<void> {
    if (this.closed) return;
    const nowMs = force ? Number.MAX_SAFE_INTEGER : Date.now();
    for (const config of await this.store.claimPushConfigs(this.owner, nowMs, this.leaseUntil(), CLAIM_BATCH)) this.track(config);
  }

  private async tick(): Promise<void> {
    try {
      const kept = new Set((await this.store.renewPushLeases(this.owner, this.leaseUntil())).map(key));
      for (const entry of [...this.held.values()]) if (!kept.has(key(entry.config))) this.forget(entry.config.taskId, entry.config.configId);
      await this.claim();
    } catch (error) {
      this.logger.warn({ err: error }, "the A2A push notification configs could not be read");
    }
  }

  /** A config was created, replaced or claimed: deliver what it is owed, if this instance holds it. */
  track(config: PushConfigRecord): void {
    if (this.closed || config.status !== "active" || config.leaseOwner !== this.owner) return;
    const existing = this.held.get(key(config));
    if (existing !== undefined) {
      existing.config = config;
      this.pump(existing);
      return;
    }
    const entry: Held = { config, running: false, again: false };
    this.held.set(key(config), entry);
    this.pump(entry);
  }

  /** A config was deleted: stop delivering to it. */
  forget(taskId: string, configId: string): void {
    const entry = this.held.get(`${taskId}\n${configId}`);
    if (entry === undefined) return;
    clearTimeout(entry.retry);
    this.held.delete(key(entry.config));
  }

  /** Stops delivering and gives the leases back, so a restart or another instance carries on at once. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.stopListening?.();
    const held = [...this.held.values()];
    for (const entry of held) clearTimeout(entry.retry);
    this.held.clear();
    await Promise.all(held.map((entry) => this.store.updatePushDelivery(entry.config.taskId, entry.config.configId, { leaseOwner: "", leaseUntilMs: 0 }).catch(() => false)));
  }

  private pump(entry: Held): void {
    if (entry.running) {
      entry.again = true;
      return;
    }
    if (entry.retry !== undefined || this.closed) return;
    entry.running = true;
    entry.again = false;
    this.deliverPending(entry)
      .catch((error: unknown) => this.logger.warn({ err: error, task_id: entry.config.taskId }, "A2A push notification failed"))
      .finally(() => {
        entry.running = false;
        if (entry.again && this.held.get(key(entry.config)) === entry) this.pump(entry);
      });
  }

  private async deliverPending(entry: Held): Promise<void> {
    const { taskId, configId } = entry.config;
    const task = await this.agent.store.getTask(taskId);
    if (task === undefined) return this.finish(entry, "done");
    if (entry.config.deliveredSequence >= task.lastSequence) {
      if (isTerminal(task.state)) await this.finish(entry, "done");
      return;
    }
    // The states are replayed from the first event: what an event shows depends on the state before it.
    let state = TaskState.PENDING;
    for (const event of await this.agent.store.listEvents(taskId, 1)) {
      const step = await eventUpdates(this.agent, this.convert, task, event, state);
      state = step.state;
      if (event.sequence <= entry.config.deliveredSequence) continue;
      for (const update of step.updates) {
        try {
          await this.post(entry.config, update);
        } catch (error) {
          return this.failed(entry, error instanceof PushFailure ? error : new PushFailure(String(error), true));
        }
      }
      if (this.closed || this.held.get(key(entry.config)) !== entry) return;
      if (!(await this.store.updatePushDelivery(taskId, configId, { deliveredSequence: event.sequence, attempts: 0, lastError: "" }))) return this.forget(taskId, configId);
      entry.config = { ...entry.config, deliveredSequence: event.sequence, attempts: 0, lastError: "" };
    }
    if (isTerminal(task.state) && entry.config.deliveredSequence >= task.lastSequence) await this.finish(entry, "done");
  }

  private async finish(entry: Held, status: "done" | "given_up", lastError = ""): Promise<void> {
    await this.store.updatePushDelivery(entry.config.taskId, entry.config.configId, { status, lastError, leaseOwner: "", leaseUntilMs: 0 });
    this.forget(entry.config.taskId, entry.config.configId);
  }

  private async failed(entry: Held, failure: PushFailure): Promise<void> {
    const { maxRetries, retryBaseDelayMs, retryMaxDelayMs } = this.agent.config;
    const attempts = entry.config.attempts + 1;
    const fields = { task_id: entry.config.taskId, config_id: entry.config.configId, url: entry.config.url, attempts, error: failure.message };
    if (!failure.transient || attempts > maxRetries) {
      this.logger.warn(fields, "giving up on the A2A push notification webhook for this task");
      return this.finish(entry, "given_up", failure.message.slice(0, 500));
    }
    const delay = Math.min(retryBaseDelayMs * 2 ** (attempts - 1), retryMaxDelayMs);
    this.logger.debug(fields, "A2A push notification failed; retrying");
    await this.store.updatePushDelivery(entry.config.taskId, entry.config.configId, { attempts, nextAttemptAtMs: Date.now() + delay, lastError: failure.message.slice(0, 500) });
    entry.config = { ...entry.config, attempts };
    entry.retry = setTimeout(() => {
      entry.retry = undefined;
      this.pump(entry);
    }, delay);
    entry.retry.unref();
  }

  /** One POST of one StreamResponse; a PushFailure says whether to try again. */
  private post(config: PushConfigRecord, update: StreamResponse): Promise<void> {
    const body = JSON.stringify(toJson(StreamResponseSchema, update));
    const url = new URL(config.url);
    const secure = url.protocol === "https:";
    const headers: Record<string, string> = { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) };
    if (config.token) headers[NOTIFICATION_TOKEN_HEADER] = config.token;
    if (config.authScheme) headers.authorization = `${config.authScheme} ${config.authCredentials}`.trim();
    const policy = this.agent.outbound;
    return new Promise((resolve, reject) => {
      const request = (secure ? https : http).request(url, {
        method: "POST",
        headers,
        timeout: POST_TIMEOUT_MS,
        createConnection: (options: http.ClientRequestArgs) => pinnedConnection(policy, options as DialOptions, secure),
      } as http.RequestOptions);
      request.on("response", (response) => {
        response.resume();
        const status = response.statusCode ?? 0;
        if (status >= 200 && status < 300) resolve();
        // 408 and 429 and every 5xx may pass; another 4xx is the webhook refusing.
        else reject(new PushFailure(`the webhook answered HTTP ${status}`, status >= 500 || status === 408 || status === 429));
      });
      request.on("timeout", () => request.destroy(new PushFailure("the webhook did not answer in time", true)));
      request.on("error", (error) => reject(error instanceof PushFailure ? error : new PushFailure(error.message, !(error instanceof OutboundRefusal))));
      request.end(body);
    });
  }
}
