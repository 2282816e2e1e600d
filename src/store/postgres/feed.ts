// Changes committed by other instances sharing the database: each commit
// that records an event sends a NOTIFY in its transaction (delivered only
// if it commits); every instance LISTENs on one connection. In case a
// notification is lost (a dropped connection, say), the tasks someone
// waits on are also polled now and then.
import pg from "pg";
import type { Logger } from "../../log.js";
import type { StoreChange } from "../changes.js";

export const CHANNEL = "synapse_changes";

/** Longest NOTIFY payload we send (PostgreSQL's limit is 8000 bytes); longer ones say only "look". */
const MAX_PAYLOAD = 7900;

interface Notice {
  /** The instance that committed. */
  o: string;
  /** t: a task event; u: an outbound (callback received) event. */
  k: "t" | "u";
  t?: string;
  s?: number;
  e?: string;
}

/** The NOTIFY payload for a change this instance commits. */
export function notice(origin: string, change: { kind: "task" | "outbound"; taskId: string; sequence: number; executorAgentId?: string }): string {
  const full: Notice = { o: origin, k: change.kind === "task" ? "t" : "u", t: change.taskId, s: change.sequence, e: change.executorAgentId };
  const text = JSON.stringify(full);
  return Buffer.byteLength(text) <= MAX_PAYLOAD ? text : JSON.stringify({ o: origin, k: full.k });
}

const CONNECT_TIMEOUT_MS = 3000;
const FIRST_RECONNECT_DELAY_MS = 100;
/** Backoff cap: notifications resume within this long of the database's return (the poll covers the gap). */
const MAX_RECONNECT_DELAY_MS = 2000;

export interface FeedOptions {
  url: string;
  origin: string;
  emit: (change: StoreChange) => void;
  /** Latest sequence of each of the given tasks. */
  lastSequences: (taskIds: string[]) => Promise<Map<string, number>>;
  logger: Logger;
  pollIntervalMs: number;
  /** Told when the notification connection drops: the database may have gone. */
  onLost?: (cause: unknown) => void;
}

export class PostgresChangeFeed {
  private client: pg.Client | undefined;
  private closed = false;
  private watched: () => Iterable<string> = () => [];
  /** The latest sequence announced per watched task, so polls announce only what is new. */
  private readonly announced = new Map<string, number>();
  private readonly poller: NodeJS.Timeout;
  private reconnectDelayMs = FIRST_RECONNECT_DELAY_MS;

  constructor(private readonly options: FeedOptions) {
    this.poller = setInterval(() => void this.poll(), options.pollIntervalMs);
    this.poller.unref();
  }

  async start(): Promise<void> {
    await this.connect();
  }

  watch(taskIds: () => Iterable<string>): void {
    this.watched = taskIds;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true });
    client.on("notification", (message) => this.onNotification(message.payload));
    // Heard on every connection error: an 'error' event with no listener would end the process.
    client.on("error", (error) => this.lost(client, error));
    client.on("end", () => this.lost(client, new Error("the notification connection ended")));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.reconnectDelayMs = FIRST_RECONNECT_DELAY_MS;
  }

  private lost(client: pg.Client, cause: unknown): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    this.options.onLost?.(cause);
    client.end().catch(() => undefined);
    this.options.logger.warn("lost the PostgreSQL notification connection; reconnecting");
    const retry = () => {
      if (this.closed) return;
      this.connect().then(
        () => {
          this.options.logger.info("listening for PostgreSQL notifications again");
          this.catchUp();
        },
        () => {
          this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, MAX_RECONNECT_DELAY_MS);
          setTimeout(retry, this.reconnectDelayMs).unref();
        },
      );
    };
    setTimeout(retry, this.reconnectDelayMs).unref();
  }

  private onNotification(payload: string | undefined): void {
    let parsed: Notice;
    try {
      parsed = JSON.parse(payload ?? "") as Notice;
    } catch {
      return;
    }
    if (parsed.o === this.options.origin) return; // our own commit: already announced
    if (parsed.t === undefined || parsed.s === undefined) {
      void this.poll();
      return;
    }
    if (parsed.k === "u") {
      this.options.emit({ kind: "outbound", executorAgentId: parsed.e ?? "", taskId: parsed.t, sequence: parsed.s });
      return;
    }
    if (this.announced.has(parsed.t)) this.announced.set(parsed.t, Math.max(this.announced.get(parsed.t)!, parsed.s));
    this.options.emit({ kind: "task", taskId: parsed.t, sequence: parsed.s });
  }

  /**
   * After a reconnect: every watched task is announced once (its waiters
   * read the store), as a notification sent meanwhile was lost, and the
   * poll then goes on from there.
   */
  private catchUp(): void {
    this.announced.clear();
    void this.poll();
  }

  /** Announces events of watched tasks that no notification announced. */
  private async poll(): Promise<void> {
    if (this.closed) return;
    const ids = [...new Set(this.watched())].slice(0, 10_000);
    const current = new Set(ids);
    for (const id of this.announced.keys()) if (!current.has(id)) this.announced.delete(id);
    if (ids.length === 0) return;
    let latest: Map<string, number>;
    try {
      latest = await this.options.lastSequences(ids);
    } catch {
      return; // the next poll tries again
    }
    for (const [taskId, sequence] of latest) {
      const known = this.announced.get(taskId);
      this.announced.set(taskId, sequence);
      // A task polled for the first time is announced too: a spurious wake-up costs one read, a missed one a stuck waiter.
      if (known === undefined || sequence > known) this.options.emit({ kind: "task", taskId, sequence });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.poller);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
