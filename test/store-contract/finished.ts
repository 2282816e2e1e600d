// Finished tasks in the Store contract: a terminal task reads back exactly
// as it was committed (every field, the exact bytes of every event, the
// replies remembered with its messages), however a store keeps finished
// work (the memory store packs it into bytes), and still takes lease
// changes and later commits.
import { create, equals } from "@bufbuild/protobuf";
import { expect, it } from "vitest";
import { HeaderSchema, MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskCompletePayloadSchema, TaskRequestPayloadSchema, TaskState, type TaskResult } from "../../gen/synapse/v1/payloads_pb.js";
import { buildTaskResult, completePayloadBytes } from "../../src/agent/task-result.js";
import { generateKey } from "../../src/crypto/keys.js";
import { seal } from "../../src/envelope/seal.js";
import type { SeenMessage, StoredEvent, StoredReply, TaskStore } from "../../src/store/store.js";
import { executor, newTask, requester, sameEnvelope, signedEvent, signedReply } from "./fixtures.js";

const key = generateKey();

/** A signed task_complete carrying `result`, as the executor records it. */
function completion(taskId: string, sequence: number, result: TaskResult, resultBytes: Uint8Array): StoredEvent {
  const payload = create(TaskCompletePayloadSchema, { taskId, result, summary: "done" });
  const { envelope, header } = seal(
    {
      messageType: MessageType.TASK_COMPLETE,
      payload,
      encodedPayload: completePayloadBytes(taskId, resultBytes, "done"),
      sender: executor,
      receiver: requester,
      taskId,
      sequence: BigInt(sequence),
      sentAtMs: 5_000 + sequence,
    },
    key,
  );
  return { taskId, sequence, envelope, header, payload };
}

/** Same bytes, and the same decoded header and payload. */
function expectSameEvent(read: StoredReply, written: StoredReply): void {
  expect(sameEnvelope(read, written)).toBe(true);
  expect(equals(HeaderSchema, read.header, written.header)).toBe(true);
  expect(read.payload).toEqual(written.payload);
}

const seen = (messageId: string, reply: StoredReply, taskId = "t1"): SeenMessage => ({
  scope: "p2p",
  messageId,
  senderAgentId: requester.agentId,
  digest: `digest-${messageId}`,
  keepUntilMs: 99_000,
  taskId,
  reply,
});

export function finishedTaskCases(store: () => TaskStore): void {
  it("a finished task reads back as committed: its fields, its events' exact bytes, the replies remembered with it", async () => {
    const output = { words: 3, ratio: 0.25, text: "héllo ✓ 🚀", flags: [true, false, null], nested: { list: [-1, "two"] } };
    const { result, bytes } = buildTaskResult("text_analysis", output, { model: "none" }, undefined);
    const events: StoredEvent[] = [signedEvent("t1", 1), signedEvent("t1", 2), completion("t1", 3, result, bytes)];
    const answers = [{ kind: "info" as const, phase: "execution" as const, fields: { language: "日本語", count: 2 } }];
    // The input is the request's payload itself, as intake makes it.
    const request = create(TaskRequestPayloadSchema, { task: { id: "t1", type: "text_analysis", payload: { text: "ünïcode input", n: [1, 2] } } });
    const task = newTask("t1", { idempotencyKey: "idem", leaseOwner: "runner", leaseUntilMs: 9_000, answers, request, payload: request.task!.payload! });
    await store().createTask(task, events[0]!, { message: seen("m1", events[0]!) });
    await store().commit("t1", 1, { state: TaskState.EXECUTING, progress: 50 }, events[1], { message: seen("m2", events[1]!) });
    const standalone = signedReply("m3");
    const finished = await store().commit("t1", 2, { state: TaskState.COMPLETED, progress: 100, statusMessage: "done", result, updatedAtMs: 3_000 }, events[2], {
      message: seen("m3", standalone),
    });
    const ack = signedReply("m4");
    expect(await store().rememberMessage(seen("m4", ack))).toBeUndefined();

    expect(await store().getTask("t1")).toEqual(finished);
    expect((await store().getTask("t1"))?.result).toEqual(result);
    expect((await store().getTask("t1"))?.payload).toEqual({ text: "ünïcode input", n: [1, 2] });
    const read = await store().listEvents("t1", 1);
    expect(read.map((event) => [event.taskId, event.sequence])).toEqual([
      ["t1", 1],
      ["t1", 2],
      ["t1", 3],
    ]);
    read.forEach((event, index) => expectSameEvent(event, events[index]!));
    expectSameEvent((await store().listEvents("t1", 2, 1))[0]!, events[1]!);
    expect(await store().listEvents("t1", 4)).toEqual([]);
    for (const [messageId, reply] of [["m1", events[0]!], ["m2", events[1]!], ["m3", standalone], ["m4", ack]] as const) {
      const message = await store().getMessage("p2p", messageId);
      expect(message).toMatchObject({ scope: "p2p", messageId, senderAgentId: requester.agentId, digest: `digest-${messageId}`, keepUntilMs: 99_000, taskId: "t1" });
      expectSameEvent(message!.reply!, reply);
    }
    expect(await store().rememberMessage(seen("m1", ack))).toMatchObject({ digest: "digest-m1" });
    expect(await store().findTaskByIdempotencyKey(requester.agentId, "idem")).toEqual(finished);
    expect((await store().listTasks({ requesterAgentId: requester.agentId, pageSize: 10, states: [TaskState.COMPLETED] })).tasks).toEqual([finished]);
    expect(await store().countTasks([TaskState.COMPLETED])).toBe(1);
    expect(await store().countTasks([TaskState.EXECUTING])).toBe(0);
  });

  it("a finished task still takes lease changes and later commits, keeping its log", async () => {
    const events = [1, 2, 3].map((sequence) => signedEvent("t1", sequence));
    await store().createTask(newTask("t1", { leaseOwner: "runner", leaseUntilMs: 9_000 }), events[0]!);
    await store().commit("t1", 1, { state: TaskState.FAILED, statusMessage: "gave up" }, events[1]);
    // The run that ended gives its lease up after the task has finished.
    expect(await store().renewLeases("runner", ["t1"], 12_000)).toEqual(["t1"]);
    expect(await store().getTask("t1")).toMatchObject({ leaseOwner: "runner", leaseUntilMs: 12_000, version: 2 });
    await store().releaseLeases("someone-else", ["t1"]);
    expect(await store().getTask("t1")).toMatchObject({ leaseOwner: "runner" });
    await store().releaseLeases("runner", ["t1"]);
    expect(await store().getTask("t1")).toMatchObject({ leaseOwner: "", leaseUntilMs: 0, version: 2, state: TaskState.FAILED });
    await expect(store().commit("t1", 1, { statusMessage: "stale" })).rejects.toMatchObject({ reason: "version" });
    expect(await store().commit("t1", 2, { statusMessage: "acknowledged" })).toMatchObject({ version: 3, lastSequence: 2, statusMessage: "acknowledged" });
    await store().commit("t1", 3, {}, events[2]);
    const read = await store().listEvents("t1", 1);
    expect(read.map((event) => event.sequence)).toEqual([1, 2, 3]);
    read.forEach((event, index) => expectSameEvent(event, events[index]!));
    expect(await store().getTask("t1")).toMatchObject({ state: TaskState.FAILED, statusMessage: "acknowledged", version: 4, lastSequence: 3, leaseOwner: "" });
  });
}
