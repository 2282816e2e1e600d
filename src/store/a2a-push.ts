// Where A2A push-notification configs live: per task, each with its own
// delivery position (the last event sequence whose notifications reached
// its webhook), attempts and backoff, so that what is still to notify
// survives a restart. Memory, SQLite and PostgreSQL implement it alike.

export type PushStatus = "active" | "done" | "given_up";

export interface PushConfigRecord {
  readonly taskId: string;
  readonly configId: string;
  /** The webhook (checked against the outbound policy when created, and at each connection). */
  readonly url: string;
  /** Sent as X-A2A-Notification-Token, when set. */
  readonly token: string;
  /** Sent as `Authorization: <scheme> <credentials>`, when a scheme is set. */
  readonly authScheme: string;
  readonly authCredentials: string;
  readonly createdAtMs: number;
  /** The last event sequence delivered (0: none yet). */
  readonly deliveredSequence: number;
  readonly attempts: number;
  readonly nextAttemptAtMs: number;
  readonly status: PushStatus;
  readonly lastError: string;
  /** The instance delivering it ("" none), until when unless renewed: one instance of several delivers each config. */
  readonly leaseOwner: string;
  readonly leaseUntilMs: number;
}

export type PushDeliveryPatch = Partial<Pick<PushConfigRecord, "deliveredSequence" | "attempts" | "nextAttemptAtMs" | "status" | "lastError" | "leaseOwner" | "leaseUntilMs">>;

/** The most configs one task keeps. */
export const MAX_PUSH_CONFIGS_PER_TASK = 16;

export class PushConfigLimitError extends Error {
  constructor(readonly max: number) {
    super(`a task keeps at most ${max} push notification configs`);
    this.name = "PushConfigLimitError";
  }
}

export interface A2APushStore {
  /**
   * Creates the config, or replaces the one with the same id (its delivery
   * position kept). PushConfigLimitError past MAX_PUSH_CONFIGS_PER_TASK.
   */
  putPushConfig(record: PushConfigRecord): Promise<PushConfigRecord>;
  getPushConfig(taskId: string, configId: string): Promise<PushConfigRecord | undefined>;
  /** A task's configs, oldest first. */
  listPushConfigs(taskId: string): Promise<PushConfigRecord[]>;
  /** False when there was none. */
  deletePushConfig(taskId: string, configId: string): Promise<boolean>;
  /** Active configs (still to deliver), any task, oldest first. */
  listActivePushConfigs(limit: number): Promise<PushConfigRecord[]>;
  /**
   * Leases to `owner` until `untilMs` the active configs no live lease holds
   * (or `owner` holds already), oldest first, and returns them.
   */
  claimPushConfigs(owner: string, nowMs: number, untilMs: number, limit: number): Promise<PushConfigRecord[]>;
  /** Extends `owner`'s leases; returns the configs it still holds. */
  renewPushLeases(owner: string, untilMs: number): Promise<PushConfigRecord[]>;
  /** False when the config is gone. */
  updatePushDelivery(taskId: string, configId: string, patch: PushDeliveryPatch): Promise<boolean>;
}

/** A config as its table row reads (SQLite and PostgreSQL share the columns). */
export interface PushRow {
  task_id: string;
  config_id: string;
  url: string;
  token: string;
  auth_scheme: string;
  auth_credentials: string;
  created_at_ms: number;
  delivered_sequence: number;
  attempts: number;
  next_attempt_at_ms: number;
  status: string;
  last_error: string;
  lease_owner: string;
  lease_until_ms: number;
}

export function pushRecordOf(row: PushRow): PushConfigRecord {
  return {
    taskId: row.task_id,
    configId: row.config_id,
    url: row.url,
    token: row.token,
    authScheme: row.auth_scheme,
    authCredentials: row.auth_credentials,
    createdAtMs: Number(row.created_at_ms),
    deliveredSequence: Number(row.delivered_sequence),
    attempts: Number(row.attempts),
    nextAttemptAtMs: Number(row.next_attempt_at_ms),
    status: row.status as PushStatus,
    lastError: row.last_error,
    leaseOwner: row.lease_owner,
    leaseUntilMs: Number(row.lease_until_ms),
  };
}

/** The column each field of a delivery patch is kept in, in both SQL stores. */
export const PUSH_DELIVERY_COLUMNS: Readonly<Record<keyof PushDeliveryPatch, string>> = {
  deliveredSequence: "delivered_sequence",
  attempts: "attempts",
  nextAttemptAtMs: "next_attempt_at_ms",
  status: "status",
  lastError: "last_error",
  leaseOwner: "lease_owner",
  leaseUntilMs: "lease_until_ms",
};
