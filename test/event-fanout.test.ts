// Many listeners on one task: the bus tells them over later turns of the
// event loop, so the commit (and the call that made it) goes on at once,
// and every listener still hears every change in commit order; Watch
// streams get the events the bus hands over, without reading the store.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { TaskEventBus, type TaskChange } from "../src/agent/events.js";
import { TaskReader } from "../src/agent/reader.js";
import type { SynapseClient } from "../src/client/requester.js";
import { ChangeEmitter } from "../src/store/changes.js";
import { MemoryTaskStore } from "../src/store/memory/index.js";
import { newTask, requester, signedEvent } from "./store-contract/fixtures.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

const change = (taskId: string, sequence: number) => ({ kind: "task" as const, taskId, sequence });
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("the task event bus", () => {
  it("tells a few listeners at once", () => {
    const emitter = new ChangeEmitter();
    const bus = new TaskEventBus(emitter);
    const heard: number[] = [];
    for (let i = 0; i < 10; i++) bus.subscribe("t", (c) => heard.push(c.sequence));
    emitter.emit(change("t", 1));
    expect(heard).toHaveLength(10);
    bus.close();
  });

  it("tells thousands over later turns, each in commit order, skipping those that left", async () => {
    const emitter = new ChangeEmitter();
    const bus = new TaskEventBus(emitter);
    const heard = Array.from({ length: 3000 }, () => [] as number[]);
    const leave = heard.map((log) => bus.subscribe("busy", (c: TaskChange) => log.push(c.sequence)));
    const quiet: number[] = [];
    bus.subscribe("quiet", (c) => quiet.push(c.sequence));

    emitter.emit(change("busy", 1));
    emitter.emit(change("busy", 2));
    expect(heard.every((log) => log.length === 0)).toBe(true); // the committing turn goes on
    // A quiet task committed behind the backlog waits its turn too, so the order across tasks holds.
    emitter.emit(change("quiet", 1));
    expect(quiet).toEqual([]);
    await turn();
    expect(heard.filter((log) => log.length > 0).length).toBeLessThan(3000); // partly told after one turn
    leave[2999]!(); // the last one leaves before its turn comes
    for (let i = 0; i < 20; i++) await turn();
    expect(heard.slice(0, 2999).every((log) => log.join() === "1,2")).toBe(true);
    expect(heard[2999]).toEqual([]);
    expect(quiet).toEqual([1]);

    emitter.emit(change("busy", 3)); // the backlog is empty again
    for (let i = 0; i < 20; i++) await turn();
    expect(heard.slice(0, 2999).every((log) => log.join() === "1,2,3")).toBe(true);
    bus.close();
  });

  it("says when a task's changes have reached all its listeners, a turn later", async () => {
    const emitter = new ChangeEmitter();
    const bus = new TaskEventBus(emitter);
    let told = 0;
    for (let i = 0; i < 1500; i++) bus.subscribe("busy", () => told++);
    bus.subscribe("other", () => undefined);
    let settledAt: number | undefined;
    await bus.settled("busy").then(() => (settledAt = told)); // nothing under way: at once
    expect(settledAt).toBe(0);

    emitter.emit(change("busy", 1));
    emitter.emit(change("busy", 2));
    settledAt = undefined;
    let otherSettled = false;
    void bus.settled("busy").then(() => (settledAt = told));
    void bus.settled("other").then(() => (otherSettled = true)); // another task waits for nothing
    await turn();
    expect(otherSettled).toBe(true);
    expect(settledAt).toBeUndefined();
    for (let i = 0; i < 20 && told < 3000; i++) await turn();
    expect(told).toBe(3000); // both changes, to every listener
    expect(settledAt).toBeUndefined(); // the sockets get their turn first
    await turn();
    expect(settledAt).toBe(3000);
    bus.close();
  });
});

describe("waking those waiting for a task's tellings", () => {
  it("wakes them a slice per turn, so that thousands of ends never hold the event loop at once", async () => {
    const emitter = new ChangeEmitter();
    const bus = new TaskEventBus(emitter);
    let told = 0;
    for (let i = 0; i < 1000; i++) bus.subscribe("t", () => told++);
    emitter.emit(change("t", 1));
    let woken = 0;
    for (let i = 0; i < 600; i++) void bus.settled("t").then(() => woken++);
    for (let i = 0; i < 20 && told < 1000; i++) await turn();
    const perTurn: number[] = [];
    for (let i = 0; i < 4; i++) {
      await turn();
      perTurn.push(woken);
    }
    expect(perTurn).toEqual([256, 512, 600, 600]);
    bus.close();
  });
});

describe("watches through the task reader", () => {
  /** A memory store that counts event-log reads; `beforeRead` runs inside each getTask, before it reads. */
  const countingStore = (beforeRead: () => Promise<void> = async () => undefined) => {
    const store = new MemoryTaskStore();
    let logReads = 0;
    const listEvents = store.listEvents.bind(store);
    const getTask = store.getTask.bind(store);
    store.listEvents = (...args) => {
      logReads++;
      return listEvents(...args);
    };
    store.getTask = async (taskId) => {
      const before = await getTask(taskId); // the task as read before the commit below lands
      await beforeRead();
      return before;
    };
    return { store, logReads: () => logReads };
  };
  const heartbeat = () => Promise.reject(new Error("no heartbeat expected"));

  it("a watch from past the last event reads nothing from the store and hears what comes next", async () => {
    const { store, logReads } = countingStore();
    const bus = new TaskEventBus(store);
    const reader = new TaskReader({ store, bus, heartbeatIntervalMs: 60_000, heartbeat });
    await store.createTask(newTask("t"), signedEvent("t", 1));
    const items = reader.watch("t", requester.agentId, 2, new AbortController().signal);
    expect((await items.next()).value).toMatchObject({ kind: "snapshot" });
    const next = items.next();
    await store.commit("t", 1, { state: TaskState.COMPLETED, progress: 100 }, signedEvent("t", 2));
    expect((await next).value).toMatchObject({ kind: "event", event: { sequence: 2 } });
    expect((await items.next()).done).toBe(true);
    expect(logReads()).toBe(0);
    bus.close();
  });

  it("a watch from an earlier event reads the log from the store first", async () => {
    const { store, logReads } = countingStore();
    const bus = new TaskEventBus(store);
    const reader = new TaskReader({ store, bus, heartbeatIntervalMs: 60_000, heartbeat });
    await store.createTask(newTask("t"), signedEvent("t", 1));
    await store.commit("t", 1, { state: TaskState.COMPLETED, progress: 100 }, signedEvent("t", 2));
    const sequences: number[] = [];
    for await (const item of reader.watch("t", requester.agentId, 1, AbortSignal.timeout(5000))) if (item.kind === "event") sequences.push(item.event.sequence);
    expect(sequences).toEqual([1, 2]);
    expect(logReads()).toBe(1);
    bus.close();
  });

  it("loses no event committed while the task is being read", async () => {
    let commitDuringRead: (() => Promise<void>) | undefined;
    const { store } = countingStore(() => commitDuringRead?.() ?? Promise.resolve());
    const bus = new TaskEventBus(store);
    const reader = new TaskReader({ store, bus, heartbeatIntervalMs: 60_000, heartbeat });
    await store.createTask(newTask("t"), signedEvent("t", 1));
    commitDuringRead = async () => {
      commitDuringRead = undefined;
      await store.commit("t", 1, { state: TaskState.COMPLETED, progress: 100 }, signedEvent("t", 2));
    };
    const seen: string[] = [];
    for await (const item of reader.watch("t", requester.agentId, 2, AbortSignal.timeout(5000))) {
      seen.push(item.kind === "event" ? `event ${item.event.sequence}` : item.kind === "snapshot" ? `snapshot at ${item.task.lastSequence}` : item.kind);
    }
    expect(seen).toEqual(["snapshot at 1", "event 2"]); // the snapshot predates the commit; the bus hands the event over
    bus.close();
  });

  it("no watch ends before every watcher of the task has the last event", async () => {
    const store = new MemoryTaskStore();
    const bus = new TaskEventBus(store);
    const reader = new TaskReader({ store, bus, heartbeatIntervalMs: 60_000, heartbeat: () => Promise.reject(new Error("no heartbeat expected")) });
    await store.createTask(newTask("t"), signedEvent("t", 1));
    const watchers = 1100; // told over three turns
    let snapshots = 0;
    let lastEvents = 0;
    const endedAfter: number[] = []; // how many watchers had the last event when each watch ended
    const done = Array.from({ length: watchers }, async () => {
      for await (const item of reader.watch("t", requester.agentId, 2, new AbortController().signal)) {
        if (item.kind === "snapshot") snapshots++;
        if (item.kind === "event" && item.event.sequence === 2) lastEvents++;
      }
      endedAfter.push(lastEvents);
    });
    while (snapshots < watchers) await turn();
    await store.commit("t", 1, { state: TaskState.COMPLETED, progress: 100 }, signedEvent("t", 2));
    await Promise.all(done);
    expect(lastEvents).toBe(watchers);
    expect(Math.min(...endedAfter)).toBe(watchers);
    bus.close();
  });
});

describe("many Watch streams on one task", () => {
  let server: TestServer;
  let client: SynapseClient;
  beforeAll(async () => {
    server = await startTestServer({ agentId: "executor_fanout" });
    client = await connectClient(server);
  });
  afterAll(() => server.close());

  it("each gets every event once, in order, and the decision is answered", async () => {
    const { taskId, task } = await client.submit("text_analysis", { text: "One. Two. Three.", require_approval: true }, { waitMs: 5000 });
    expect(task?.state).toBe(TaskState.NEED_HUMAN);
    const from = Number(task!.lastSequence) + 1;
    const watchers = 200; // past the bus's at-once limit: told over several turns
    const opened: Promise<void>[] = [];
    const logs = await Promise.all(
      Array.from({ length: watchers }, async () => {
        const log: { sequence: number; type: MessageType }[] = [];
        let ready!: () => void;
        opened.push(new Promise<void>((resolve) => (ready = resolve)));
        const done = (async () => {
          for await (const item of client.watch(taskId, { fromSequence: from })) {
            if (item.kind === "snapshot") ready();
            if (item.kind === "event") log.push({ sequence: item.sequence, type: item.event.type });
          }
        })();
        return { log, done };
      }),
    );
    await Promise.all(opened);
    const decided = await client.decide(taskId, { action: "approve" }, { waitMs: 5000 });
    expect(decided.task?.state).toBe(TaskState.COMPLETED);
    await Promise.all(logs.map((w) => w.done));
    const expected = Array.from({ length: Number(decided.task!.lastSequence) - from + 1 }, (_, i) => from + i);
    for (const { log } of logs) {
      expect(log.map((e) => e.sequence)).toEqual(expected); // every event once, in order, each verified by the client
      expect(log.at(-1)?.type).toBe(MessageType.TASK_COMPLETE);
    }
  });
});
