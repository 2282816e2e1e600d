// The A2A push part of the Store contract: configs per task, replaced in
// place under the same id (their delivery position kept), at most
// MAX_PUSH_CONFIGS_PER_TASK a task, delivery positions and statuses
// updated one config at a time, and kept across a reopen by durable stores.
import { expect, it } from "vitest";
import { MAX_PUSH_CONFIGS_PER_TASK, type PushConfigRecord } from "../../src/store/a2a-push.js";
import type { Storage } from "../../src/store/storage.js";

export interface PushContractContext {
  storage: () => Storage;
  reopen?: () => Promise<Storage>;
}

const config = (taskId: string, configId: string, createdAtMs: number, url = "https://hooks.example/a"): PushConfigRecord => ({
  taskId,
  configId,
  url,
  token: "tok",
  authScheme: "Bearer",
  authCredentials: "secret",
  createdAtMs,
  deliveredSequence: 0,
  attempts: 0,
  nextAttemptAtMs: 0,
  status: "active",
  lastError: "",
  leaseOwner: "",
  leaseUntilMs: 0,
});

export function a2aPushContractCases(ctx: PushContractContext): void {
  it("a2a push: keeps configs per task, replaces one by id, deletes it", async () => {
    const push = ctx.storage().a2aPush;
    expect(await push.putPushConfig(config("t1", "c1", 10))).toEqual(config("t1", "c1", 10));
    await push.putPushConfig(config("t1", "c2", 20));
    await push.putPushConfig(config("t2", "c1", 15));
    expect((await push.listPushConfigs("t1")).map((entry) => entry.configId)).toEqual(["c1", "c2"]);
    expect(await push.updatePushDelivery("t1", "c1", { deliveredSequence: 4, attempts: 2, lastError: "503" })).toBe(true);
    const replaced = await push.putPushConfig(config("t1", "c1", 99, "https://hooks.example/b"));
    expect(replaced).toMatchObject({ url: "https://hooks.example/b", createdAtMs: 10, deliveredSequence: 4, attempts: 0, lastError: "", status: "active" });
    expect(await push.getPushConfig("t2", "c1")).toMatchObject({ taskId: "t2", url: "https://hooks.example/a" });
    expect(await push.deletePushConfig("t1", "c2")).toBe(true);
    expect(await push.deletePushConfig("t1", "c2")).toBe(false);
    expect(await push.getPushConfig("t1", "c2")).toBeUndefined();
    expect(await push.updatePushDelivery("t1", "c2", { attempts: 1 })).toBe(false);
  });

  it("a2a push: lists the active configs oldest first, and holds a task to the limit", async () => {
    const push = ctx.storage().a2aPush;
    await push.putPushConfig(config("a", "1", 30));
    await push.putPushConfig(config("b", "1", 10));
    await push.putPushConfig(config("c", "1", 20));
    await push.updatePushDelivery("c", "1", { status: "done" });
    expect((await push.listActivePushConfigs(10)).map((entry) => entry.taskId)).toEqual(["b", "a"]);
    expect(await push.listActivePushConfigs(1)).toHaveLength(1);
    for (let i = 0; i < MAX_PUSH_CONFIGS_PER_TASK - 1; i++) await push.putPushConfig(config("a", `more-${i}`, 40 + i));
    await expect(push.putPushConfig(config("a", "one-too-many", 100))).rejects.toMatchObject({ name: "PushConfigLimitError" });
    // Replacing one at the limit is not adding one.
    await expect(push.putPushConfig(config("a", "1", 101))).resolves.toMatchObject({ configId: "1" });
  });

  it("a2a push: leases each active config to one instance, renewed by it, taken over once it lapses", async () => {
    const push = ctx.storage().a2aPush;
    await push.putPushConfig(config("t1", "a", 10));
    await push.putPushConfig(config("t1", "b", 20));
    await push.putPushConfig(config("t2", "c", 30));
    await push.updatePushDelivery("t2", "c", { status: "done" });
    const first = await push.claimPushConfigs("i1", 1000, 2000, 10);
    expect(first.map((entry) => entry.configId)).toEqual(["a", "b"]);
    expect(first.every((entry) => entry.leaseOwner === "i1" && entry.leaseUntilMs === 2000)).toBe(true);
    expect(await push.claimPushConfigs("i2", 1500, 2500, 10)).toEqual([]);
    expect((await push.renewPushLeases("i1", 3000)).map((entry) => entry.configId).sort()).toEqual(["a", "b"]);
    await push.updatePushDelivery("t1", "b", { leaseOwner: "", leaseUntilMs: 0 });
    expect((await push.claimPushConfigs("i2", 2500, 4000, 10)).map((entry) => entry.configId)).toEqual(["b"]);
    // i1 stopped renewing: its lease lapses and i2 takes the config over.
    expect((await push.claimPushConfigs("i2", 3001, 5000, 10)).map((entry) => entry.configId).sort()).toEqual(["a", "b"]);
    expect(await push.renewPushLeases("i1", 6000)).toEqual([]);
  });

  if (ctx.reopen !== undefined) {
    const reopen = ctx.reopen;
    it("a2a push: keeps configs and delivery positions across a reopen", async () => {
      await ctx.storage().a2aPush.putPushConfig(config("t1", "c1", 10));
      await ctx.storage().a2aPush.updatePushDelivery("t1", "c1", { deliveredSequence: 7, nextAttemptAtMs: 1234, status: "given_up" });
      const reopened = await reopen();
      expect(await reopened.a2aPush.getPushConfig("t1", "c1")).toMatchObject({ deliveredSequence: 7, nextAttemptAtMs: 1234, status: "given_up", authCredentials: "secret" });
    });
  }
}
