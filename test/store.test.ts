// The in-memory Store's rules, which a durable store must keep too:
// versioned commits, gapless event sequences, put-if-absent messages,
// pruning, paging.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { EnvelopeSchema, HeaderSchema } from "../gen/synapse/v1/envelope_pb.js";
import { AckPayloadSchema, TaskRequestPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { MemoryStore } from "../src/store/memory.js";
import { StoreConflictError, type StoredEvent, type TaskRecord } from "../src/store/store.js";

const party = { agentId: "a", systemId: "", keyId: "k" };
const task = (taskId: string, createdAtMs: number): Omit<TaskRecord, "version" | "lastSequence"> => ({
  taskId,
  taskType: "t",
  requester: party,
  executor: { ...party, agentId: "e" },
  state: TaskState.PENDING,
  progress: 0,
  statusMessage: "",
  createdAtMs,
  updatedAtMs: createdAtMs,
  request: create(TaskRequestPayloadSchema),
  payload: {},
  idempotencyKey: "",
  requestMessageId: `m-${taskId}`,
});
const event = (taskId: string, sequence: number): StoredEvent => ({
  taskId,
  sequence,
  envelope: create(EnvelopeSchema),
  header: create(HeaderSchema, { sequence: BigInt(sequence) }),
  payload: create(AckPayloadSchema),
});

describe("MemoryStore", () => {
  it("commits only at the expected version and the next sequence, atomically", async () => {
    const store = new MemoryStore();
    const created = await store.createTask(task("t1", 1), event("t1", 1));
    expect(created).toMatchObject({ version: 1, lastSequence: 1 });
    await expect(store.createTask(task("t1", 2))).rejects.toBeInstanceOf(StoreConflictError);
    const next = await store.commit("t1", 1, { state: TaskState.CONFIRMED }, event("t1", 2));
    expect(next).toMatchObject({ version: 2, lastSequence: 2, state: TaskState.CONFIRMED });
    await expect(store.commit("t1", 1, { state: TaskState.FAILED })).rejects.toBeInstanceOf(StoreConflictError);
    await expect(store.commit("t1", 2, { state: TaskState.FAILED }, event("t1", 4))).rejects.toBeInstanceOf(StoreConflictError);
    // Nothing of a refused commit stuck.
    expect((await store.getTask("t1"))?.state).toBe(TaskState.CONFIRMED);
    expect((await store.listEvents("t1", 1)).map((e) => e.sequence)).toEqual([1, 2]);
    expect(await store.countTasks([TaskState.CONFIRMED, TaskState.PENDING])).toBe(1);
  });

  it("remembers a message once, and prunes what has expired", async () => {
    const store = new MemoryStore();
    const entry = { messageId: "m", senderAgentId: "a", digest: "d", keepUntilMs: 100 };
    expect(await store.rememberMessage(entry)).toBeUndefined();
    expect(await store.rememberMessage({ ...entry, digest: "other" })).toMatchObject({ digest: "d" });
    expect(await store.pruneMessages(99)).toBe(0);
    expect(await store.pruneMessages(100)).toBe(1);
    expect(await store.getMessage("m")).toBeUndefined();
  });

  it("pages newest first without overlap, and refuses a forged page token", async () => {
    const store = new MemoryStore();
    for (let i = 0; i < 5; i++) await store.createTask(task(`t${i}`, i % 2));
    const seen: string[] = [];
    let pageToken: string | undefined;
    do {
      const page = await store.listTasks({ requesterAgentId: "a", pageSize: 2, pageToken });
      seen.push(...page.tasks.map((t) => t.taskId));
      pageToken = page.nextPageToken || undefined;
    } while (pageToken);
    expect(new Set(seen).size).toBe(5);
    expect(seen.slice(0, 2).every((id) => ["t1", "t3"].includes(id))).toBe(true);
    await expect(store.listTasks({ requesterAgentId: "a", pageSize: 2, pageToken: "bogus" })).rejects.toBeInstanceOf(RangeError);
  });
});
