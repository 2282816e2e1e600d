// A PostgreSQL store shared by two processes' worth of stores (two pools,
// two LISTEN connections, one database): each hears what the other
// commits, unique constraints decide races, the admission limit is counted
// across both, a lost notification connection is made up by polling, and
// catalogue operations from both are serialized.
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { StoreChange } from "../src/store/changes.js";
import { postgresStorage } from "../src/store/postgres/index.js";
import type { Storage } from "../src/store/storage.js";
import { StoreConflictError, StoreLimitError } from "../src/store/store.js";
import { newTask, signedEvent } from "./store-contract/fixtures.js";
import { freshDatabase, postgresAvailable } from "./helpers/postgres.js";

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.skipIf(!postgresAvailable())("a PostgreSQL store shared by two instances", () => {
  let url: string;
  let a: Storage;
  let b: Storage;
  beforeEach(async () => {
    url = await freshDatabase();
    a = await postgresStorage(url, { pollIntervalMs: 200 });
    b = await postgresStorage(url, { pollIntervalMs: 200 });
  });
  afterEach(async () => {
    await a.close();
    await b.close();
  });

  it("tells each instance what the other committed", async () => {
    const heard: StoreChange[] = [];
    b.tasks.onChange((change) => heard.push(change));
    await a.tasks.createTask(newTask("t1"), signedEvent("t1", 1));
    await a.tasks.commit("t1", 1, { progress: 5 }, signedEvent("t1", 2));
    await until(() => heard.length >= 2);
    expect(heard.map((c) => [c.kind, c.taskId, c.sequence])).toEqual([
      ["task", "t1", 1],
      ["task", "t1", 2],
    ]);
    // From another instance a change names the event; the reader looks in the store.
    expect(heard[0]!.event).toBeUndefined();
    expect((await b.tasks.listEvents("t1", 2))[0]?.sequence).toBe(2);
  });

  it("decides races by constraints: one task id, one message id, one version", async () => {
    const message = { scope: "p2p" as const, messageId: "m1", senderAgentId: "r", digest: "d", keepUntilMs: 9e12 };
    const created = await Promise.allSettled([
      a.tasks.createTask(newTask("t1"), signedEvent("t1", 1), { message }),
      b.tasks.createTask(newTask("t1"), signedEvent("t1", 1), { message }),
    ]);
    expect(created.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect((created.find((r) => r.status === "rejected") as PromiseRejectedResult).reason).toBeInstanceOf(StoreConflictError);
    const commits = await Promise.allSettled([
      a.tasks.commit("t1", 1, { progress: 1 }, signedEvent("t1", 2)),
      b.tasks.commit("t1", 1, { progress: 2 }, signedEvent("t1", 2)),
    ]);
    expect(commits.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect((await a.tasks.listEvents("t1", 1)).map((e) => e.sequence)).toEqual([1, 2]);
  });

  it("counts the concurrency limit across both, in the commit that admits", async () => {
    const outcomes = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).tasks.createTask(newTask(`t${i}`), signedEvent(`t${i}`, 1), { maxActive: 5 })),
    );
    expect(outcomes.filter((r) => r.status === "fulfilled")).toHaveLength(5);
    for (const refused of outcomes.filter((r) => r.status === "rejected")) expect((refused as PromiseRejectedResult).reason).toBeInstanceOf(StoreLimitError);
    expect(await a.tasks.countTasks([TaskState.CONFIRMED])).toBe(5);
  });

  it("makes up for a lost notification connection by polling the tasks someone waits on", async () => {
    const heard: StoreChange[] = [];
    b.tasks.onChange((change) => heard.push(change));
    b.tasks.watchTasks?.(() => ["t1"]);
    await a.tasks.createTask(newTask("t1"), signedEvent("t1", 1));
    await until(() => heard.some((c) => c.sequence === 1));
    // Cut every LISTEN connection; the commit below sends its NOTIFY into the void for b.
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()");
    await admin.end();
    await a.tasks.commit("t1", 1, { progress: 9 }, signedEvent("t1", 2));
    await until(() => heard.some((c) => c.sequence === 2));
  });

  it("serializes catalogue operations from both instances", async () => {
    const { create } = await import("@bufbuild/protobuf");
    const { AuditEventSchema, GovernedCapabilitySchema } = await import("../gen/synapse/v1/registry_pb.js");
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 ? a : b).catalogue.update((state) => ({
          result: undefined,
          capabilities: [create(GovernedCapabilitySchema, { id: `c${i}`, code: `c${i}`, version: "1" })],
          events: [create(AuditEventSchema, { capabilityId: `c${i}`, reason: String(state.lastAuditSequence()) })],
        })),
      ),
    );
    const trail = await a.catalogue.listAudit(0, undefined, 100);
    expect(trail.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    // Each operation saw every one committed before it, whichever instance made it.
    expect(trail.map((e) => e.event.reason)).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]);
    expect([...(await b.catalogue.read()).capabilities()]).toHaveLength(10);
  });
});
