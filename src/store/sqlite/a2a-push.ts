// A2A push-notification configs in the agent's SQLite file.
import type Database from "better-sqlite3";
import { MAX_PUSH_CONFIGS_PER_TASK, PUSH_DELIVERY_COLUMNS, PushConfigLimitError, pushRecordOf, type A2APushStore, type PushConfigRecord, type PushDeliveryPatch, type PushRow } from "../a2a-push.js";

export class SqliteA2APushStore implements A2APushStore {
  private readonly sql;
  private readonly put: (record: PushConfigRecord) => PushConfigRecord;

  constructor(private readonly db: Database.Database) {
    this.sql = {
      get: db.prepare("SELECT * FROM a2a_push_configs WHERE task_id = ? AND config_id = ?"),
      count: db.prepare("SELECT COUNT(*) AS n FROM a2a_push_configs WHERE task_id = ?"),
      insert: db.prepare(
        `INSERT INTO a2a_push_configs (task_id, config_id, url, token, auth_scheme, auth_credentials, created_at_ms, delivered_sequence, attempts, next_attempt_at_ms, status, last_error, lease_owner, lease_until_ms)
         VALUES (@taskId, @configId, @url, @token, @authScheme, @authCredentials, @createdAtMs, @deliveredSequence, @attempts, @nextAttemptAtMs, @status, @lastError, @leaseOwner, @leaseUntilMs)`,
      ),
      replace: db.prepare(
        `UPDATE a2a_push_configs SET url = @url, token = @token, auth_scheme = @authScheme, auth_credentials = @authCredentials,
           attempts = 0, next_attempt_at_ms = 0, status = 'active', last_error = '' WHERE task_id = @taskId AND config_id = @configId`,
      ),
      list: db.prepare("SELECT * FROM a2a_push_configs WHERE task_id = ? ORDER BY created_at_ms, config_id"),
      delete: db.prepare("DELETE FROM a2a_push_configs WHERE task_id = ? AND config_id = ?"),
      active: db.prepare("SELECT * FROM a2a_push_configs WHERE status = 'active' ORDER BY created_at_ms LIMIT ?"),
      claim: db.prepare(
        `UPDATE a2a_push_configs SET lease_owner = @owner, lease_until_ms = @untilMs
          WHERE rowid IN (SELECT rowid FROM a2a_push_configs WHERE status = 'active' AND (lease_owner = '' OR lease_owner = @owner OR lease_until_ms < @nowMs) ORDER BY created_at_ms LIMIT @limit)
          RETURNING *`,
      ),
      renew: db.prepare("UPDATE a2a_push_configs SET lease_until_ms = ? WHERE lease_owner = ? AND status = 'active' RETURNING *"),
    };
    this.put = db.transaction((record: PushConfigRecord): PushConfigRecord => {
      const existing = this.sql.get.get(record.taskId, record.configId) as PushRow | undefined;
      if (existing !== undefined) {
        this.sql.replace.run(record);
      } else {
        const { n } = this.sql.count.get(record.taskId) as { n: number };
        if (n >= MAX_PUSH_CONFIGS_PER_TASK) throw new PushConfigLimitError(MAX_PUSH_CONFIGS_PER_TASK);
        this.sql.insert.run(record);
      }
      return pushRecordOf(this.sql.get.get(record.taskId, record.configId) as PushRow);
    });
  }

  async putPushConfig(record: PushConfigRecord): Promise<PushConfigRecord> {
    return this.put(record);
  }

  async getPushConfig(taskId: string, configId: string): Promise<PushConfigRecord | undefined> {
    const row = this.sql.get.get(taskId, configId) as PushRow | undefined;
    return row && pushRecordOf(row);
  }

  async listPushConfigs(taskId: string): Promise<PushConfigRecord[]> {
    return (this.sql.list.all(taskId) as PushRow[]).map(pushRecordOf);
  }

  async deletePushConfig(taskId: string, configId: string): Promise<boolean> {
    return this.sql.delete.run(taskId, configId).changes > 0;
  }

  async listActivePushConfigs(limit: number): Promise<PushConfigRecord[]> {
    return (this.sql.active.all(limit) as PushRow[]).map(pushRecordOf);
  }

  async claimPushConfigs(owner: string, nowMs: number, untilMs: number, limit: number): Promise<PushConfigRecord[]> {
    const rows = this.sql.claim.all({ owner, nowMs, untilMs, limit }) as PushRow[];
    return rows.map(pushRecordOf).sort((a, b) => a.createdAtMs - b.createdAtMs);
  }

  async renewPushLeases(owner: string, untilMs: number): Promise<PushConfigRecord[]> {
    return (this.sql.renew.all(untilMs, owner) as PushRow[]).map(pushRecordOf);
  }

  async updatePushDelivery(taskId: string, configId: string, patch: PushDeliveryPatch): Promise<boolean> {
    const columns = PUSH_DELIVERY_COLUMNS;
    const entries = (Object.keys(patch) as Array<keyof PushDeliveryPatch>).filter((key) => patch[key] !== undefined);
    if (entries.length === 0) return (await this.getPushConfig(taskId, configId)) !== undefined;
    const set = entries.map((key) => `${columns[key]} = @${key}`).join(", ");
    const statement = this.db.prepare(`UPDATE a2a_push_configs SET ${set} WHERE task_id = @taskId AND config_id = @configId`);
    return statement.run({ ...patch, taskId, configId }).changes > 0;
  }
}
