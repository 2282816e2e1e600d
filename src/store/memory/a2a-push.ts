// A2A push-notification configs in this process's memory.
import { MAX_PUSH_CONFIGS_PER_TASK, PushConfigLimitError, type A2APushStore, type PushConfigRecord, type PushDeliveryPatch } from "../a2a-push.js";

export class MemoryA2APushStore implements A2APushStore {
  private readonly byTask = new Map<string, Map<string, PushConfigRecord>>();

  async putPushConfig(record: PushConfigRecord): Promise<PushConfigRecord> {
    let configs = this.byTask.get(record.taskId);
    const existing = configs?.get(record.configId);
    if (existing === undefined && (configs?.size ?? 0) >= MAX_PUSH_CONFIGS_PER_TASK) throw new PushConfigLimitError(MAX_PUSH_CONFIGS_PER_TASK);
    if (configs === undefined) this.byTask.set(record.taskId, (configs = new Map()));
    const stored: PushConfigRecord =
      existing === undefined ? { ...record } : { ...record, createdAtMs: existing.createdAtMs, deliveredSequence: existing.deliveredSequence, status: "active", attempts: 0, nextAttemptAtMs: 0, lastError: "", leaseOwner: existing.leaseOwner, leaseUntilMs: existing.leaseUntilMs };
    configs.set(record.configId, stored);
    return stored;
  }

  async getPushConfig(taskId: string, configId: string): Promise<PushConfigRecord | undefined> {
    return this.byTask.get(taskId)?.get(configId);
  }

  async listPushConfigs(taskId: string): Promise<PushConfigRecord[]> {
    return [...(this.byTask.get(taskId)?.values() ?? [])].sort((a, b) => a.createdAtMs - b.createdAtMs || a.configId.localeCompare(b.configId));
  }

  async deletePushConfig(taskId: string, configId: string): Promise<boolean> {
    const configs = this.byTask.get(taskId);
    const deleted = configs?.delete(configId) ?? false;
    if (configs?.size === 0) this.byTask.delete(taskId);
    return deleted;
  }

  async listActivePushConfigs(limit: number): Promise<PushConfigRecord[]> {
    const active = [...this.byTask.values()].flatMap((configs) => [...configs.values()]).filter((config) => config.status === "active");
    return active.sort((a, b) => a.createdAtMs - b.createdAtMs).slice(0, limit);
  }

  async claimPushConfigs(owner: string, nowMs: number, untilMs: number, limit: number): Promise<PushConfigRecord[]> {
    const claimable = (await this.listActivePushConfigs(Number.MAX_SAFE_INTEGER)).filter((config) => config.leaseOwner === "" || config.leaseOwner === owner || config.leaseUntilMs < nowMs);
    return claimable.slice(0, limit).map((config) => this.set({ ...config, leaseOwner: owner, leaseUntilMs: untilMs }));
  }

  async renewPushLeases(owner: string, untilMs: number): Promise<PushConfigRecord[]> {
    const held = [...this.byTask.values()].flatMap((configs) => [...configs.values()]).filter((config) => config.leaseOwner === owner && config.status === "active");
    return held.map((config) => this.set({ ...config, leaseUntilMs: untilMs }));
  }

  private set(config: PushConfigRecord): PushConfigRecord {
    this.byTask.get(config.taskId)?.set(config.configId, config);
    return config;
  }

  async updatePushDelivery(taskId: string, configId: string, patch: PushDeliveryPatch): Promise<boolean> {
    const configs = this.byTask.get(taskId);
    const existing = configs?.get(configId);
    if (configs === undefined || existing === undefined) return false;
    configs.set(configId, { ...existing, ...patch });
    return true;
  }
}
