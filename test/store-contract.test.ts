// The Store contract: every implementation (memory, SQLite, PostgreSQL) must
// keep the same rules: versioned atomic commits, gapless event sequences,
// messages remembered once and atomically with their effect, the
// concurrency limit checked in the commit that admits, leases, the callback
// outbox, results in chunks, retention, change notifications, finished
// tasks read back as committed (store-contract/finished.ts), and the
// groups a host keeps (store-contract/groups.ts).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { create, toBinary } from "@bufbuild/protobuf";
import { ConfidentialitySchema, ConfidentialSuite } from "../gen/synapse/v1/confidential_pb.js";
import { TaskRequestPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { StoreChange } from "../src/store/changes.js";
import type { Storage } from "../src/store/storage.js";
import { DeliveryStatus, StoreConflictError, StoreLimitError, type TaskStore } from "../src/store/store.js";
import { decisionWithDeadline, newTask, requester, sameEnvelope, signedEvent, signedReply, storeKinds } from "./store-contract/fixtures.js";
import { finishedTaskCases } from "./store-contract/finished.js";
import { groupContractCases } from "./store-contract/groups.js";
import { a2aPushContractCases } from "./store-contract/a2a-push.js";

const conflict = (reason: StoreConflictError["reason"]) => expect.objectContaining({ name: "StoreConflictError", reason });

for (const kind of storeKinds()) {
  describe.skipIf(!kind.available())(`${kind.name} store`, () => {
    let storage: Storage;
    let store: TaskStore;
    beforeEach(async () => {
      storage = await kind.open();
      store = storage.tasks;
    });
    afterEach(async () => {
      await storage.close();
    });

    it("commits only at the expected version and the next sequence, atomically", async () => {
      const created = await store.createTask(newTask("t1"), signedEvent("t1", 1));
      expect(created).toMatchObject({ version: 1, lastSequence: 1 });
      await expect(store.createTask(newTask("t1"), signedEvent("t1", 1))).rejects.toEqual(conflict("task_exists"));
      const next = await store.commit("t1", 1, { state: TaskState.EXECUTING, progress: 40 }, signedEvent("t1", 2));
      expect(next).toMatchObject({ version: 2, lastSequence: 2, state: TaskState.EXECUTING, progress: 40 });
      await expect(store.commit("t1", 1, { state: TaskState.FAILED })).rejects.toEqual(conflict("version"));
      await expect(store.commit("t1", 2, { state: TaskState.FAILED }, signedEvent("t1", 4))).rejects.toEqual(conflict("sequence"));
      await expect(store.commit("nope", 1, { state: TaskState.FAILED })).rejects.toEqual(conflict("missing"));
      // Nothing of a refused commit stuck.
      const stored = await store.getTask("t1");
      expect(stored).toMatchObject({ state: TaskState.EXECUTING, version: 2, lastSequence: 2 });
      expect((await store.listEvents("t1", 1)).map((e) => e.sequence)).toEqual([1, 2]);
      // A commit without an event changes the record but not the log.
      expect(await store.commit("t1", 2, { statusMessage: "quiet" })).toMatchObject({ version: 3, lastSequence: 2, statusMessage: "quiet" });
    });

    it("keeps every field of a record, and clears the ones a patch sets to undefined", async () => {
      const decision = decisionWithDeadline(9_000);
      await store.createTask(
        newTask("t1", {
          idempotencyKey: "idem",
          pendingDecision: decision,
          resultStream: { contentType: "text/plain", totalSize: 5, sha256: new Uint8Array(32).fill(7) },
          answers: [{ kind: "info", phase: "execution", fields: { a: 1 } }],
          executionAttempts: 2,
          startedAtMs: 1_234,
        }),
        signedEvent("t1", 1),
      );
      const read = (await store.getTask("t1"))!;
      expect(read.payload).toEqual({ text: "hello", nested: { list: [1, "two", null, true] } });
      expect(read.request.task?.payload).toEqual({ text: "hello" });
      expect(read.pendingDecision?.reason?.code).toBe("approval");
      expect(read.resultStream).toEqual({ contentType: "text/plain", totalSize: 5, sha256: new Uint8Array(32).fill(7) });
      expect(read).toMatchObject({ idempotencyKey: "idem", executionAttempts: 2, startedAtMs: 1_234, answers: [{ kind: "info", phase: "execution", fields: { a: 1 } }] });
      const cleared = await store.commit("t1", 1, { pendingDecision: undefined, payload: { text: "changed" } });
      expect(cleared.pendingDecision).toBeUndefined();
      expect((await store.getTask("t1"))?.pendingDecision).toBeUndefined();
      expect((await store.getTask("t1"))?.payload).toEqual({ text: "changed" });
      expect(await store.findTaskByIdempotencyKey(requester.agentId, "idem")).toMatchObject({ taskId: "t1" });
      expect(await store.findTaskByIdempotencyKey(requester.agentId, "other")).toBeUndefined();
      await expect(store.createTask(newTask("t2", { idempotencyKey: "idem" }), signedEvent("t2", 1))).rejects.toEqual(conflict("idempotency_key"));
    });

    it("keeps the ids a task's request carried through every commit, and none for a task created without them", async () => {
      const carried = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "vendor=1", sessionId: "session-1", correlationId: "" };
      await store.createTask(newTask("t1", { carried }), signedEvent("t1", 1));
      await store.createTask(newTask("t2"), signedEvent("t2", 1));
      await store.commit("t1", 1, { state: TaskState.EXECUTING }, signedEvent("t1", 2));
      expect((await store.getTask("t1"))?.carried).toEqual(carried);
      expect((await store.listTasks({ requesterAgentId: requester.agentId, pageSize: 10 })).tasks.find((t) => t.taskId === "t1")?.carried).toEqual(carried);
      expect((await store.getTask("t2"))?.carried).toBeUndefined();
    });

    it("stores the exact signed bytes of every event and reads them from any sequence", async () => {
      const events = [1, 2, 3, 4].map((sequence) => signedEvent("t1", sequence));
      await store.createTask(newTask("t1"), events[0]!);
      for (const event of events.slice(1)) await store.commit("t1", event.sequence - 1, {}, event);
      const read = await store.listEvents("t1", 2);
      expect(read.map((e) => e.sequence)).toEqual([2, 3, 4]);
      read.forEach((event, index) => {
        expect(sameEnvelope(event, events[index + 1]!)).toBe(true);
        expect(event.header.sequence).toBe(BigInt(index + 2));
        expect(event.payload).toMatchObject({ progress: index + 2 });
      });
      expect((await store.listEvents("t1", 2, 1)).map((e) => e.sequence)).toEqual([2]);
      expect(await store.listEvents("t1", 9)).toEqual([]);
      expect(await store.listEvents("missing", 1)).toEqual([]);
    });

    it("remembers a message with the commit that acts on it, or not at all", async () => {
      const reply = signedReply("m1");
      const message = { scope: "p2p" as const, messageId: "m1", senderAgentId: "requester", digest: "d1", keepUntilMs: 10_000, taskId: "t1", reply };
      await store.createTask(newTask("t1"), signedEvent("t1", 1), { message });
      const seen = await store.getMessage("p2p", "m1");
      expect(seen).toMatchObject({ messageId: "m1", digest: "d1", taskId: "t1" });
      expect(sameEnvelope(seen!.reply!, reply)).toBe(true);
      // The same message id again: nothing of the commit happens.
      await expect(store.commit("t1", 1, { progress: 50 }, signedEvent("t1", 2), { message })).rejects.toEqual(conflict("message"));
      expect(await store.getTask("t1")).toMatchObject({ version: 1, progress: 0 });
      expect(await store.listEvents("t1", 1)).toHaveLength(1);
      await expect(store.createTask(newTask("t2"), signedEvent("t2", 1), { message })).rejects.toEqual(conflict("message"));
      expect(await store.getTask("t2")).toBeUndefined();
      // Scopes are separate; put-if-absent returns what holds.
      expect(await store.rememberMessage({ ...message, scope: "registry" })).toBeUndefined();
      expect(await store.rememberMessage({ ...message, digest: "other" })).toMatchObject({ digest: "d1" });
      // Pruning drops what would be refused as expired anyway.
      expect(await store.pruneMessages(9_999)).toBe(0);
      expect(await store.pruneMessages(10_000)).toBe(2);
      expect(await store.getMessage("p2p", "m1")).toBeUndefined();
    });

    it("admits a task only under the concurrency limit, in the same commit; finished tasks do not count", async () => {
      await store.createTask(newTask("a"), signedEvent("a", 1), { maxActive: 2 });
      await store.createTask(newTask("b"), signedEvent("b", 1), { maxActive: 2 });
      await expect(store.createTask(newTask("c"), signedEvent("c", 1), { maxActive: 2 })).rejects.toBeInstanceOf(StoreLimitError);
      expect(await store.getTask("c")).toBeUndefined();
      // A task refused at admission (terminal at birth) is not held back by the limit.
      await store.createTask(newTask("r", { state: TaskState.REJECTED }), signedEvent("r", 1), { maxActive: 2 });
      await store.commit("a", 1, { state: TaskState.COMPLETED }, signedEvent("a", 2));
      await store.createTask(newTask("c"), signedEvent("c", 1), { maxActive: 2 });
      expect(await store.countTasks([TaskState.CONFIRMED, TaskState.EXECUTING])).toBe(2);
      expect(await store.countTasks([TaskState.COMPLETED, TaskState.REJECTED])).toBe(2);
      // A write that is refused changes no count; a state change moves one.
      await expect(store.commit("b", 7, { state: TaskState.FAILED }, signedEvent("b", 2))).rejects.toEqual(conflict("version"));
      await expect(store.createTask(newTask("d"), signedEvent("d", 1), { maxActive: 2 })).rejects.toBeInstanceOf(StoreLimitError);
      await store.commit("b", 1, { state: TaskState.EXECUTING }, signedEvent("b", 2));
      expect(await store.countTasks([TaskState.CONFIRMED])).toBe(1);
      expect(await store.countTasks([TaskState.EXECUTING])).toBe(1);
      expect(await store.countTasks([TaskState.EXECUTING, TaskState.FAILED])).toBe(1);
      expect(await store.countTasks([TaskState.EXECUTING, TaskState.CONFIRMED, TaskState.EXECUTING])).toBe(2);
      await store.commit("b", 2, { state: TaskState.FAILED }, signedEvent("b", 3));
      expect(await store.countTasks([TaskState.CONFIRMED, TaskState.EXECUTING])).toBe(1);
      await store.createTask(newTask("d"), signedEvent("d", 1), { maxActive: 2 });
    });

    it("pages newest first without overlap, filters by state, and refuses a forged page token", async () => {
      for (let i = 0; i < 7; i++) {
        await store.createTask(newTask(`t${i}`, { createdAtMs: 1_000 + (i % 3), state: i % 2 ? TaskState.COMPLETED : TaskState.CONFIRMED }), signedEvent(`t${i}`, 1));
      }
      await store.createTask(newTask("other", { requester: { ...requester, agentId: "someone-else" } }), signedEvent("other", 1));
      const seen: string[] = [];
      let pageToken: string | undefined;
      do {
        const page = await store.listTasks({ requesterAgentId: "requester", pageSize: 2, pageToken });
        seen.push(...page.tasks.map((t) => t.taskId));
        pageToken = page.nextPageToken || undefined;
      } while (pageToken);
      expect(seen).toEqual(["t5", "t2", "t4", "t1", "t6", "t3", "t0"]);
      const completed = await store.listTasks({ requesterAgentId: "requester", pageSize: 10, states: [TaskState.COMPLETED] });
      expect(completed.tasks.map((t) => t.taskId).sort()).toEqual(["t1", "t3", "t5"]);
      await expect(store.listTasks({ requesterAgentId: "requester", pageSize: 2, pageToken: "bogus" })).rejects.toBeInstanceOf(RangeError);
    });

    it("filters by task type, and lists every requester's tasks when no requester is given", async () => {
      await store.createTask(newTask("a1", { createdAtMs: 1_000 }), signedEvent("a1", 1));
      await store.createTask(newTask("s1", { createdAtMs: 1_001, taskType: "summarization", state: TaskState.INFO_NEEDED }), signedEvent("s1", 1));
      await store.createTask(newTask("d1", { createdAtMs: 1_002, taskType: "data_analysis" }), signedEvent("d1", 1));
      await store.createTask(newTask("o1", { createdAtMs: 1_003, taskType: "summarization", requester: { ...requester, agentId: "someone-else" } }), signedEvent("o1", 1));
      const ids = async (query: Partial<Parameters<typeof store.listTasks>[0]>) =>
        (await store.listTasks({ requesterAgentId: "requester", pageSize: 10, ...query })).tasks.map((t) => t.taskId);
      expect(await ids({ taskTypes: ["summarization"] })).toEqual(["s1"]);
      expect(await ids({ taskTypes: ["summarization", "data_analysis"] })).toEqual(["d1", "s1"]);
      expect(await ids({ taskTypes: ["summarization"], states: [TaskState.CONFIRMED] })).toEqual([]);
      expect(await ids({ taskTypes: [] })).toEqual(["d1", "s1", "a1"]);
      expect(await ids({ requesterAgentId: undefined })).toEqual(["o1", "d1", "s1", "a1"]);
      expect(await ids({ requesterAgentId: undefined, taskTypes: ["summarization"] })).toEqual(["o1", "s1"]);
      // Paging over every requester's tasks, with a filter, without overlap.
      const seen: string[] = [];
      let pageToken: string | undefined;
      do {
        const page = await store.listTasks({ requesterAgentId: undefined, taskTypes: ["summarization", "text_analysis"], pageSize: 1, pageToken });
        seen.push(...page.tasks.map((t) => t.taskId));
        pageToken = page.nextPageToken || undefined;
      } while (pageToken);
      expect(seen).toEqual(["o1", "s1", "a1"]);
    });

    it("leases: claimed by one owner, renewed while held, fenced, released, and taken over once expired", async () => {
      await store.createTask(newTask("t1", { leaseOwner: "a", leaseUntilMs: 2_000 }), signedEvent("t1", 1));
      await store.createTask(newTask("t2"), signedEvent("t2", 1));
      const states = [TaskState.CONFIRMED];
      expect((await store.listUnleased(states, 1_500, 10)).map((t) => t.taskId)).toEqual(["t2"]);
      expect((await store.listUnleased(states, 2_500, 10)).map((t) => t.taskId).sort()).toEqual(["t1", "t2"]);
      expect((await store.listUnleased(states, 1_500, 10, true)).map((t) => t.taskId).sort()).toEqual(["t1", "t2"]);
      // b may not take a live lease, may take it once expired, or when told the owner is gone.
      await expect(store.commit("t1", 1, { leaseOwner: "b", leaseUntilMs: 9_000 }, undefined, { claim: { nowMs: 1_500 } })).rejects.toEqual(conflict("lease"));
      expect(await store.renewLeases("a", ["t1", "t2"], 3_000)).toEqual(["t1"]);
      await expect(store.commit("t1", 1, { leaseOwner: "b", leaseUntilMs: 9_000 }, undefined, { claim: { nowMs: 2_500 } })).rejects.toEqual(conflict("lease"));
      const taken = await store.commit("t1", 1, { leaseOwner: "b", leaseUntilMs: 9_000, executionAttempts: 1 }, undefined, { claim: { nowMs: 3_500 } });
      expect(taken).toMatchObject({ leaseOwner: "b", leaseUntilMs: 9_000, executionAttempts: 1, version: 2 });
      // The old owner is fenced off and cannot renew.
      await expect(store.commit("t1", 2, { progress: 10 }, signedEvent("t1", 2), { fence: "a" })).rejects.toEqual(conflict("lease"));
      expect(await store.renewLeases("a", ["t1"], 10_000)).toEqual([]);
      expect(await store.commit("t1", 2, { progress: 10 }, signedEvent("t1", 2), { fence: "b" })).toMatchObject({ progress: 10 });
      // Renewal does not change the version; a forced claim ignores a live lease.
      expect(await store.renewLeases("b", ["t1"], 12_000)).toEqual(["t1"]);
      expect(await store.getTask("t1")).toMatchObject({ version: 3, leaseUntilMs: 12_000 });
      expect(await store.commit("t1", 3, { leaseOwner: "c", leaseUntilMs: 20_000 }, undefined, { claim: { nowMs: 4_000, force: true } })).toMatchObject({ leaseOwner: "c" });
      await store.releaseLeases("c", ["t1"]);
      expect(await store.getTask("t1")).toMatchObject({ leaseOwner: "", leaseUntilMs: 0 });
    });

    it("finds decisions whose deadline has passed", async () => {
      await store.createTask(newTask("late", { state: TaskState.NEED_HUMAN, pendingDecision: decisionWithDeadline(5_000) }), signedEvent("late", 1));
      await store.createTask(newTask("later", { state: TaskState.HUMAN_DECIDING, pendingDecision: decisionWithDeadline(8_000) }), signedEvent("later", 1));
      await store.createTask(newTask("none", { state: TaskState.NEED_HUMAN, pendingDecision: decisionWithDeadline(0) }), signedEvent("none", 1));
      await store.commit("none", 1, { state: TaskState.CANCELLED, pendingDecision: undefined }, signedEvent("none", 2));
      expect((await store.listDecisionDeadlines(6_000, 10)).map((t) => t.taskId)).toEqual(["late"]);
      expect((await store.listDecisionDeadlines(8_000, 10)).map((t) => t.taskId).sort()).toEqual(["late", "later"]);
      // With a limit, the earliest deadlines come first, whatever order the tasks were made in.
      await store.createTask(newTask("earliest", { state: TaskState.NEED_HUMAN, pendingDecision: decisionWithDeadline(1_000) }), signedEvent("earliest", 1));
      expect((await store.listDecisionDeadlines(8_000, 2)).map((t) => t.taskId)).toEqual(["earliest", "late"]);
    });

    it("keeps results in chunks and reads any range", async () => {
      const bytes = new Uint8Array(600 * 1024).map((_, i) => (i * 7) % 251);
      await store.putResult("t1", bytes);
      for (const [offset, length] of [
        [0, 10],
        [262_140, 10],
        [300_000, 300_000],
        [614_390, 100],
        [614_400, 64],
      ] as const) {
        expect(Buffer.from(await store.readResult("t1", offset, length))).toEqual(Buffer.from(bytes.subarray(offset, Math.min(bytes.length, offset + length))));
      }
      await store.putResult("t1", new Uint8Array([1, 2, 3]));
      expect([...(await store.readResult("t1", 1, 64))]).toEqual([2, 3]);
      await store.putResult("empty", new Uint8Array(0));
      expect((await store.readResult("empty", 0, 64)).byteLength).toBe(0);
      await expect(store.readResult("none", 0, 1)).rejects.toBeInstanceOf(RangeError);
    });

    it("keeps the events of tasks this agent requested, in sequence", async () => {
      await store.expectOutbound({ executorAgentId: "x", taskId: "o1", state: TaskState.PENDING, lastSequence: 0 });
      await store.expectOutbound({ executorAgentId: "x", taskId: "o1", state: TaskState.PENDING, lastSequence: 0 });
      expect(await store.getOutbound("x", "o1")).toMatchObject({ lastSequence: 0, state: TaskState.PENDING });
      await store.appendOutboundEvent("x", signedEvent("o1", 1), TaskState.CONFIRMED);
      await expect(store.appendOutboundEvent("x", signedEvent("o1", 3), TaskState.EXECUTING)).rejects.toEqual(conflict("sequence"));
      await expect(store.appendOutboundEvent("y", signedEvent("o1", 1), TaskState.EXECUTING)).rejects.toEqual(conflict("missing"));
      await store.appendOutboundEvent("x", signedEvent("o1", 2), TaskState.EXECUTING);
      expect(await store.getOutbound("x", "o1")).toMatchObject({ lastSequence: 2, state: TaskState.EXECUTING });
      expect((await store.listOutboundEvents("x", "o1", 2)).map((e) => e.sequence)).toEqual([2]);
    });

    it("keeps a confidential outbound task's wrapped keys, and a plaintext one's absence of them", async () => {
      const confidential = create(ConfidentialitySchema, {
        suite: ConfidentialSuite.X25519_HKDF_SHA256_AES128GCM,
        taskKeyId: "AAAAAAAAAAAAAAAAAAAAAA",
        keys: [{ agentId: "me", keyId: "k1", enc: new Uint8Array(32).fill(7), ciphertext: new Uint8Array(48).fill(9) }],
      });
      await store.expectOutbound({ executorAgentId: "x", taskId: "c1", state: TaskState.PENDING, lastSequence: 0, confidential });
      await store.expectOutbound({ executorAgentId: "x", taskId: "p1", state: TaskState.PENDING, lastSequence: 0 });
      const read = await store.getOutbound("x", "c1");
      expect(toBinary(ConfidentialitySchema, read!.confidential!)).toEqual(toBinary(ConfidentialitySchema, confidential));
      const advanced = await store.appendOutboundEvent("x", signedEvent("c1", 1), TaskState.CONFIRMED);
      expect(Buffer.from(advanced.confidential!.keys[0]!.ciphertext)).toEqual(Buffer.alloc(48, 9));
      expect((await store.getOutbound("x", "p1"))?.confidential).toBeUndefined();
    });

    it("the callback outbox: one owner at a time, due times, progress kept, done entries left alone", async () => {
      await store.createTask(newTask("t1"), signedEvent("t1", 1), { callbackUrl: "http://127.0.0.1:1/cb" });
      expect(await store.getDelivery("t1")).toMatchObject({ url: "http://127.0.0.1:1/cb", nextSequence: 1, status: DeliveryStatus.ACTIVE, owner: "" });
      expect((await store.claimDeliveries("a", 100, 1_000, 10)).map((d) => d.taskId)).toEqual(["t1"]);
      expect(await store.claimDeliveries("b", 500, 1_500, 10)).toEqual([]);
      expect(await store.updateDelivery("t1", "b", { nextSequence: 9 })).toBe(false);
      expect(await store.updateDelivery("t1", "a", { nextSequence: 2, attempts: 1, nextAttemptAtMs: 2_000, lastError: "unavailable" })).toBe(true);
      expect(await store.renewDeliveries("a", ["t1"], 1_800)).toEqual(["t1"]);
      // Expired ownership, but not yet due: nobody takes it.
      expect(await store.claimDeliveries("b", 1_900, 2_500, 10)).toEqual([]);
      expect((await store.claimDeliveries("b", 2_000, 3_000, 10, "t1")).map((d) => d.nextSequence)).toEqual([2]);
      expect(await store.updateDelivery("t1", "b", { status: DeliveryStatus.DONE, release: true })).toBe(true);
      expect(await store.getDelivery("t1")).toMatchObject({ status: DeliveryStatus.DONE, owner: "", nextSequence: 2, attempts: 1, lastError: "unavailable" });
      expect(await store.claimDeliveries("c", 9_000, 10_000, 10)).toEqual([]);
    });

    it("prunes finished tasks past retention with everything that belongs to them", async () => {
      await store.createTask(newTask("old", { idempotencyKey: "k" }), signedEvent("old", 1), { callbackUrl: "http://127.0.0.1:1/" });
      await store.commit("old", 1, { state: TaskState.COMPLETED, updatedAtMs: 2_000 }, signedEvent("old", 2));
      await store.putResult("old", new Uint8Array([1]));
      await store.createTask(newTask("recent"), signedEvent("recent", 1));
      await store.commit("recent", 1, { state: TaskState.FAILED, updatedAtMs: 9_000 }, signedEvent("recent", 2));
      await store.createTask(newTask("running", { updatedAtMs: 1 }), signedEvent("running", 1));
      await store.expectOutbound({ executorAgentId: "x", taskId: "o1", state: TaskState.PENDING, lastSequence: 0 });
      expect(await store.pruneTasks(5_000, 100)).toBe(1);
      expect(await store.getTask("old")).toBeUndefined();
      expect(await store.listEvents("old", 1)).toEqual([]);
      await expect(store.readResult("old", 0, 1)).rejects.toBeInstanceOf(RangeError);
      expect(await store.getDelivery("old")).toBeUndefined();
      expect(await store.getTask("recent")).toBeDefined();
      expect(await store.getTask("running")).toBeDefined();
      expect(await store.getOutbound("x", "o1")).toBeDefined();
      // The idempotency key is free again with its task gone.
      await store.createTask(newTask("again", { idempotencyKey: "k" }), signedEvent("again", 1));
    });

    it("announces every committed event, with the event and the task", async () => {
      const changes: StoreChange[] = [];
      const stop = store.onChange((change) => changes.push(change));
      await store.createTask(newTask("t1"), signedEvent("t1", 1));
      await store.commit("t1", 1, { progress: 5 }, signedEvent("t1", 2));
      await store.commit("t1", 2, { statusMessage: "no event" });
      await store.expectOutbound({ executorAgentId: "x", taskId: "o1", state: TaskState.PENDING, lastSequence: 0 });
      await store.appendOutboundEvent("x", signedEvent("o1", 1), TaskState.CONFIRMED);
      stop();
      await store.commit("t1", 3, { progress: 6 }, signedEvent("t1", 3));
      expect(changes.map((c) => [c.kind, c.taskId, c.sequence])).toEqual([
        ["task", "t1", 1],
        ["task", "t1", 2],
        ["outbound", "o1", 1],
      ]);
      expect(changes[1]).toMatchObject({ task: { progress: 5, version: 2 }, event: { sequence: 2 } });
    });

    it("pins: the first key for an agent id holds", async () => {
      const first = { agentId: "a1", keyId: "k1", publicKey: new Uint8Array(32).fill(1), pinnedAtMs: 1 };
      expect(await storage.pins.pin(first)).toEqual(first);
      expect(await storage.pins.pin({ ...first, keyId: "k2", publicKey: new Uint8Array(32).fill(2) })).toEqual(first);
      expect(await storage.pins.getPin("a1")).toEqual(first);
      expect(await storage.pins.findPinByKeyId("k1")).toEqual(first);
      expect(await storage.pins.findPinByKeyId("k2")).toBeUndefined();
    });

    it("the directory: an id stays bound to its key, and updates name the version they expect", async () => {
      const { RegisteredAgentSchema } = await import("../gen/synapse/v1/registry_pb.js");
      const entry = { agentId: "a1", keyId: "k1", publicKey: new Uint8Array(32).fill(1), agent: create(RegisteredAgentSchema, { endpointUrl: "http://127.0.0.1:1" }), leaseUntilMs: 10 };
      const put = await storage.directory.putAgent(entry);
      expect(put.entry).toMatchObject({ version: 1 });
      expect((await storage.directory.putAgent({ ...entry, keyId: "k2" })).held).toMatchObject({ keyId: "k1" });
      expect((await storage.directory.putAgent({ ...entry, leaseUntilMs: 20 })).entry).toMatchObject({ version: 2, leaseUntilMs: 20 });
      expect(await storage.directory.updateAgent({ ...entry, leaseUntilMs: 30 }, 1)).toBeUndefined();
      expect(await storage.directory.updateAgent({ ...entry, leaseUntilMs: 30 }, 2)).toMatchObject({ version: 3 });
      expect((await storage.directory.getAgent("a1"))?.agent.endpointUrl).toBe("http://127.0.0.1:1");
      expect(await storage.directory.findAgentByKeyId("k1")).toMatchObject({ agentId: "a1" });
      expect(await storage.directory.listAgents()).toHaveLength(1);
      expect(await storage.directory.deleteAgent("a1", 2)).toBe(false);
      expect(await storage.directory.deleteAgent("a1", 3)).toBe(true);
      expect(await storage.directory.getAgent("a1")).toBeUndefined();
    });

    it("the catalogue: one operation at a time, writes all or nothing, audit in order", async () => {
      const { AuditEventSchema, GovernedCapabilitySchema } = await import("../gen/synapse/v1/registry_pb.js");
      const capability = (id: string) => create(GovernedCapabilitySchema, { id, code: id, version: "1" });
      const audit = (id: string) => create(AuditEventSchema, { capabilityId: id, reason: `about ${id}` });
      await Promise.all(
        ["a", "b", "c"].map((id) =>
          storage.catalogue.update((state) => ({ result: undefined, capabilities: [capability(id)], events: [audit(id), audit(`${id}-${state.lastAuditSequence()}`)] })),
        ),
      );
      await expect(
        storage.catalogue.update(() => {
          throw new Error("refused");
        }),
      ).rejects.toThrow("refused");
      const state = await storage.catalogue.read();
      expect([...state.capabilities()].map((c) => c.id).sort()).toEqual(["a", "b", "c"]);
      expect(state.lastAuditSequence()).toBe(6);
      const trail = await storage.catalogue.listAudit(0, undefined, 100);
      expect(trail.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
      // Each operation saw the ones before it.
      expect(trail.filter((_, i) => i % 2 === 1).map((e) => e.event.capabilityId.split("-")[1])).toEqual(["0", "2", "4"]);
      expect((await storage.catalogue.listAudit(0, "b", 10)).map((e) => e.event.reason)).toEqual(["about b"]);
      expect((await storage.catalogue.listAudit(4, undefined, 1)).map((e) => e.sequence)).toEqual([5]);
    });

    it("the catalogue's permission grants: put, replace, delete, with the operation's other writes", async () => {
      const { AuditEventSchema, PermissionGrantSchema } = await import("../gen/synapse/v1/registry_pb.js");
      const grant = (keyId: string, permissions: string[]) => create(PermissionGrantSchema, { keyId, permissions, reason: "r" });
      await storage.catalogue.update(() => ({ result: undefined, capabilities: [], events: [create(AuditEventSchema, { reason: "granted" })], grants: [grant("k1", ["a:read"]), grant("*", ["b:read"])] }));
      await storage.catalogue.update((state) => {
        expect(state.getGrant("k1")?.permissions).toEqual(["a:read"]);
        return { result: undefined, capabilities: [], events: [], grants: [grant("k1", ["a:read", "c:write"])] };
      });
      let state = await storage.catalogue.read();
      expect(state.getGrant("k1")?.permissions).toEqual(["a:read", "c:write"]);
      expect([...state.grants()].map((g) => g.keyId).sort()).toEqual(["*", "k1"]);
      // A throw writes no grant either.
      await expect(
        storage.catalogue.update(() => {
          throw new Error("refused");
        }),
      ).rejects.toThrow("refused");
      // No permissions: deleted.
      await storage.catalogue.update(() => ({ result: undefined, capabilities: [], events: [], grants: [grant("*", [])] }));
      state = await storage.catalogue.read();
      expect(state.getGrant("*")).toBeUndefined();
      expect([...state.grants()].map((g) => g.keyId)).toEqual(["k1"]);
      expect(state.lastAuditSequence()).toBe(1);
      // Another instance on a shared store sees them.
      if (kind.name === "postgres") {
        const other = await kind.reopen!();
        try {
          expect((await other.catalogue.read()).getGrant("k1")?.permissions).toEqual(["a:read", "c:write"]);
          await other.catalogue.update(() => ({ result: undefined, capabilities: [], events: [], grants: [grant("k2", ["d:read"])] }));
          expect((await storage.catalogue.read()).getGrant("k2")?.permissions).toEqual(["d:read"]);
        } finally {
          await other.close();
        }
      }
    });

    finishedTaskCases(() => store);

    groupContractCases({
      storage: () => storage,
      reopen:
        kind.reopen === undefined
          ? undefined
          : async () => {
              await storage.close();
              storage = await kind.reopen!();
              store = storage.tasks;
              return storage;
            },
    });

    a2aPushContractCases({
      storage: () => storage,
      reopen:
        kind.reopen === undefined
          ? undefined
          : async () => {
              await storage.close();
              storage = await kind.reopen!();
              store = storage.tasks;
              return storage;
            },
    });

    // Memory forgets by design; the durable stores must not.
    if (kind.reopen !== undefined) it("keeps everything across a close and reopen", async () => {
      await store.createTask(newTask("t1", { idempotencyKey: "k" }), signedEvent("t1", 1), { message: { scope: "p2p", messageId: "m1", senderAgentId: "r", digest: "d", keepUntilMs: 99_999 } });
      await store.commit("t1", 1, { progress: 3 }, signedEvent("t1", 2));
      await store.createTask(newTask("done", { state: TaskState.REJECTED }), signedEvent("done", 1));
      // An input that is the request's payload (as intake makes it) is kept once, with the request; a changed one as itself.
      const requestOf = (id: string) => create(TaskRequestPayloadSchema, { task: { id, type: "text_analysis", payload: { text: "as sent", n: [1, 2] } } });
      const same = requestOf("same");
      const changed = requestOf("changed");
      await store.createTask(newTask("same", { request: same, payload: same.task!.payload! }), signedEvent("same", 1));
      await store.createTask(newTask("changed", { request: changed, payload: changed.task!.payload! }), signedEvent("changed", 1));
      await store.commit("changed", 1, { payload: { text: "modified" } }, signedEvent("changed", 2));
      await store.putResult("t1", new Uint8Array([9, 8, 7]));
      await storage.pins.pin({ agentId: "a1", keyId: "k1", publicKey: new Uint8Array(32), pinnedAtMs: 1 });
      const { PermissionGrantSchema } = await import("../gen/synapse/v1/registry_pb.js");
      await storage.catalogue.update(() => ({ result: undefined, capabilities: [], events: [], grants: [create(PermissionGrantSchema, { keyId: "k1", permissions: ["a:read"] })] }));
      await storage.close();
      storage = await kind.reopen!();
      store = storage.tasks;
      expect(await store.getTask("t1")).toMatchObject({ progress: 3, version: 2, lastSequence: 2 });
      expect((await store.getTask("same"))!.payload).toEqual({ text: "as sent", n: [1, 2] });
      expect((await store.getTask("changed"))!.payload).toEqual({ text: "modified" });
      expect((await store.getTask("changed"))!.request.task!.payload).toEqual({ text: "as sent", n: [1, 2] });
      expect(await store.countTasks([TaskState.CONFIRMED, TaskState.EXECUTING])).toBe(3);
      expect(await store.countTasks([TaskState.REJECTED])).toBe(1);
      await expect(store.createTask(newTask("t3"), signedEvent("t3", 1), { maxActive: 3 })).rejects.toBeInstanceOf(StoreLimitError);
      expect((await store.listEvents("t1", 1)).map((e) => e.sequence)).toEqual([1, 2]);
      expect(await store.getMessage("p2p", "m1")).toMatchObject({ digest: "d" });
      expect([...(await store.readResult("t1", 0, 10))]).toEqual([9, 8, 7]);
      expect(await storage.pins.getPin("a1")).toMatchObject({ keyId: "k1" });
      expect((await storage.catalogue.read()).getGrant("k1")?.permissions).toEqual(["a:read"]);
      await expect(store.createTask(newTask("t2", { idempotencyKey: "k" }), signedEvent("t2", 1))).rejects.toEqual(conflict("idempotency_key"));
    });
  });
}
