// A2A push-notification configs in PostgreSQL, shared by the instances.
import { MAX_PUSH_CONFIGS_PER_TASK, PUSH_DELIVERY_COLUMNS, PushConfigLimitError, pushRecordOf, type A2APushStore, type PushConfigRecord, type PushDeliveryPatch, type PushRow as Row } from "../a2a-push.js";
import { transaction, type Database } from "./database.js";

const columns = PUSH_DELIVERY_COLUMNS;

export class PostgresA2APushStore implements A2APushStore {
  constructor(private readonly pool: Database) {}

  async putPushConfig(record: PushConfigRecord): Promise<PushConfigRecord> {
    return transaction(this.pool, async (client) => {
      // One task's configs are counted and written under a lock on the task id.
      await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`a2a_push:${record.taskId}`]);
      const existing = await client.query("SELECT 1 FROM a2a_push_configs WHERE task_id = $1 AND config_id = $2", [record.taskId, record.configId]);
      if (existing.rowCount === 0) {
        const { rows } = await client.query<{ n: string }>("SELECT COUNT(*) AS n FROM a2a_push_configs WHERE task_id = $1", [record.taskId]);
        if (Number(rows[0]!.n) >= MAX_PUSH_CONFIGS_PER_TASK) throw new PushConfigLimitError(MAX_PUSH_CONFIGS_PER_TASK);
        await client.query(
          `INSERT INTO a2a_push_configs (task_id, config_id, url, token, auth_scheme, auth_credentials, created_at_ms, delivered_sequence, attempts, next_attempt_at_ms, status, last_error, lease_owner, lease_until_ms)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
          [
            record.taskId,
            record.configId,
            record.url,
            record.token,
            record.authScheme,
            record.authCredentials,
            record.createdAtMs,
            record.deliveredSequence,
            record.attempts,
            record.nextAttemptAtMs,
            record.status,
            record.lastError,
            record.leaseOwner,
            record.leaseUntilMs,
          ],
        );
      } else {
        await client.query(
          `UPDATE a2a_push_configs SET url = $3, token = $4, auth_scheme = $5, auth_credentials = $6, attempts = 0, next_attempt_at_ms = 0, status = 'active', last_error = ''
           WHERE task_id = $1 AND config_id = $2`,
          [record.taskId, record.configId, record.url, record.token, record.authScheme, record.authCredentials],
        );
      }
      const { rows } = await client.query<Row>("SELECT * FROM a2a_push_configs WHERE task_id = $1 AND config_id = $2", [record.taskId, record.configId]);
      return pushRecordOf(rows[0]!);
    });
  }

  async getPushConfig(taskId: string, configId: string): Promise<PushConfigRecord | undefined> {
    const { rows } = await this.pool.query<Row>("SELECT * FROM a2a_push_configs WHERE task_id = $1 AND config_id = $2", [taskId, configId]);
    return rows[0] && pushRecordOf(rows[0]);
  }

  async listPushConfigs(taskId: string): Promise<PushConfigRecord[]> {
    const { rows } = await this.pool.query<Row>("SELECT * FROM a2a_push_configs WHERE task_id = $1 ORDER BY created_at_ms, config_id", [taskId]);
    return rows.map(pushRecordOf);
  }

  async deletePushConfig(taskId: string, configId: string): Promise<boolean> {
    const result = await this.pool.query("DELETE FROM a2a_push_configs WHERE task_id = $1 AND config_id = $2", [taskId, configId]);
    return (result.rowCount ?? 0) > 0;
  }

  async listActivePushConfigs(limit: number): Promise<PushConfigRecord[]> {
    const { rows } = await this.pool.query<Row>("SELECT * FROM a2a_push_configs WHERE status = 'active' ORDER BY created_at_ms LIMIT $1", [limit]);
    return rows.map(pushRecordOf);
  }

  async claimPushConfigs(owner: string, nowMs: number, untilMs: number, limit: number): Promise<PushConfigRecord[]> {
    // SKIP LOCKED: instances claiming at once take different configs.
    const { rows } = await this.pool.query<Row>(
      `UPDATE a2a_push_configs SET lease_owner = $1, lease_until_ms = $3
        WHERE (task_id, config_id) IN (
          SELECT task_id, config_id FROM a2a_push_configs
           WHERE status = 'active' AND (lease_owner = '' OR lease_owner = $1 OR lease_until_ms < $2)
           ORDER BY created_at_ms LIMIT $4 FOR UPDATE SKIP LOCKED)
        RETURNING *`,
      [owner, nowMs, untilMs, limit],
    );
    return rows.map(pushRecordOf).sort((a, b) => a.createdAtMs - b.createdAtMs);
  }

  async renewPushLeases(owner: string, untilMs: number): Promise<PushConfigRecord[]> {
    const { rows } = await this.pool.query<Row>("UPDATE a2a_push_configs SET lease_until_ms = $2 WHERE lease_owner = $1 AND status = 'active' RETURNING *", [owner, untilMs]);
    return rows.map(pushRecordOf);
  }

  async updatePushDelivery(taskId: string, configId: string, patch: PushDeliveryPatch): Promise<boolean> {
    const keys = (Object.keys(patch) as Array<keyof PushDeliveryPatch>).filter((key) => patch[key] !== undefined);
    if (keys.length === 0) return (await this.getPushConfig(taskId, configId)) !== undefined;
    const set = keys.map((key, index) => `${columns[key]} = $${index + 3}`).join(", ");
    const result = await this.pool.query(`UPDATE a2a_push_configs SET ${set} WHERE task_id = $1 AND config_id = $2`, [taskId, configId, ...keys.map((key) => patch[key])]);
    return (result.rowCount ?? 0) > 0;
  }
}
