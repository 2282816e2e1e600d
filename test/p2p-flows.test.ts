// Every flow of the P2P protocol through a real server and the requester
// client: normal, reject, need-info, human in the loop, cancel, and the
// non-task messages.
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import {
  CapabilityQueryPayloadSchema,
  HeartbeatPayloadSchema,
  AgentStatus,
  TaskState,
  type CapabilityResponsePayload,
  type HeartbeatPayload,
  type TaskAckPayload,
  type TaskConfirmPayload,
  type TaskNeedInfoPayload,
  type TaskRejectPayload,
} from "../gen/synapse/v1/payloads_pb.js";
import type { SynapseClient } from "../src/client/requester.js";
import { fromValue } from "../src/protocol/json-values.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

const TEXT = "Agents hand tasks to each other. Each task has a state. The state machine refuses illegal steps. Agents sign every message.";

let server: TestServer;
let client: SynapseClient;

beforeAll(async () => {
  server = await startTestServer({ agentId: "executor_flows" });
  client = await connectClient(server);
});
afterAll(() => server.close());

async function events(taskId: string) {
  const out = [];
  for await (const item of client.watch(taskId)) if (item.kind === "event") out.push(item);
  return out;
}

describe("normal flow", () => {
  it("confirms, completes, and accepts the requester's ack", async () => {
    const { reply, task, taskId } = await client.submit("text_analysis", { text: TEXT }, { waitMs: 5000 });
    expect(reply?.type).toBe(MessageType.TASK_CONFIRM);
    expect((reply?.payload as TaskConfirmPayload).confirmed).toBe(true);
    expect(reply?.header.sequence).toBe(1n);
    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(task?.progress).toBe(100);
    const output = fromValue(task?.result?.output) as { words: number; sentences: number; top_words: Array<{ word: string }> };
    expect(output.sentences).toBe(4);
    expect(output.words).toBe(21);
    expect(output.top_words[0]).toEqual({ word: "agents", count: 2 });

    const log = await events(taskId);
    expect(log.map((e) => e.sequence)).toEqual(log.map((_, i) => i + 1));
    // Starting to run is not an event of its own, and the handler's progress(100) just before
    // it completes says nothing the completion does not: two events.
    expect(log.map((e) => e.event.type)).toEqual([MessageType.TASK_CONFIRM, MessageType.TASK_COMPLETE]);
    expect(log.map((e) => e.state)).toEqual([TaskState.CONFIRMED, TaskState.COMPLETED]);

    const ack = await client.acknowledge(taskId);
    expect(ack.reply?.type).toBe(MessageType.ACK);
    expect((await client.getTask(taskId)).state).toBe(TaskState.COMPLETED);
  });

  it("without waiting, answers at once and the task can be polled to completion", async () => {
    const { task, taskId } = await client.submit("text_analysis", { text: "One. Two." });
    expect([TaskState.CONFIRMED, TaskState.EXECUTING, TaskState.COMPLETED]).toContain(task?.state);
    const done = await client.waitFor(taskId);
    expect(done.state).toBe(TaskState.COMPLETED);
  });

  it("rejects an unsupported task type with capability_lacking", async () => {
    const { reply, task } = await client.submit("poetry", { text: "x" });
    expect(reply?.type).toBe(MessageType.TASK_REJECT);
    expect((reply?.payload as TaskRejectPayload).reason?.code).toBe(ErrorCode.CAPABILITY_LACKING);
    expect(task?.state).toBe(TaskState.REJECTED);
  });

  it("rejects a payload that fails the input schema with invalid_params", async () => {
    const { reply, task } = await client.submit("text_analysis", { text: 42 });
    expect(reply?.type).toBe(MessageType.TASK_REJECT);
    const reject = reply?.payload as TaskRejectPayload;
    expect(reject.reason?.code).toBe(ErrorCode.INVALID_PARAMS);
    expect(reject.reason?.message).toContain("/text");
    expect(task?.rejection?.reason?.code).toBe(ErrorCode.INVALID_PARAMS);
  });

  it("fails a task whose handler fails, with the handler's code", async () => {
    const { task } = await client.submit("data_analysis", { csv: 'a,b\n"unterminated' }, { waitMs: 5000 });
    expect(task?.state).toBe(TaskState.FAILED);
    expect(task?.error?.code).toBe(ErrorCode.INVALID_PARAMS);
  });
});

describe("need-info flow", () => {
  it("asks for max_sentences with a suggested value, and resumes when it is provided", async () => {
    const { reply, task, taskId } = await client.submit("summarization", { text: TEXT }, { waitMs: 5000 });
    expect(reply?.type).toBe(MessageType.TASK_NEED_INFO);
    const needInfo = reply?.payload as TaskNeedInfoPayload;
    expect(needInfo.missingFields[0]?.field).toBe("max_sentences");
    expect(fromValue(needInfo.missingFields[0]?.suggestedValue)).toBe(3);
    expect(task?.state).toBe(TaskState.INFO_NEEDED);
    expect(task?.pendingInfo?.missingFields[0]?.field).toBe("max_sentences");

    const provided = await client.provideInfo(taskId, { max_sentences: 2 }, { waitMs: 5000 });
    expect(provided.reply?.type).toBe(MessageType.TASK_ACK);
    expect((provided.reply?.payload as TaskAckPayload).state).toBe(TaskState.INFO_PROVIDED);
    expect(provided.task?.state).toBe(TaskState.COMPLETED);
    const output = fromValue(provided.task?.result?.output) as { sentences: string[]; original_sentences: number };
    expect(output.sentences).toHaveLength(2);
    expect(output.original_sentences).toBe(4);

    const log = await events(taskId);
    expect(log.map((e) => e.state)).toEqual([
      TaskState.INFO_NEEDED,
      TaskState.INFO_PROVIDED,
      TaskState.CONFIRMED,
      TaskState.COMPLETED,
    ]);
  });

  it("rejects when the provided value is still not acceptable", async () => {
    const { taskId } = await client.submit("summarization", { text: TEXT });
    const provided = await client.provideInfo(taskId, { max_sentences: 0 }, { waitMs: 5000 });
    expect(provided.task?.state).toBe(TaskState.REJECTED);
  });
});

describe("human in the loop", () => {
  it("waits for a decision; modified fields reach the handler", async () => {
    const { reply, task, taskId } = await client.submit("text_analysis", { text: TEXT, require_approval: true }, { waitMs: 5000 });
    expect(reply?.type).toBe(MessageType.TASK_CONFIRM);
    expect(task?.state).toBe(TaskState.NEED_HUMAN);
    expect(task?.pendingDecision?.reason?.code).toBe("approval_required");
    expect(task?.pendingDecision?.decisionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(task?.pendingDecision?.escalationLevel).toBe(1);

    const decided = await client.decide(taskId, { action: "modify", fields: { top: 1 }, notes: "only the top word" }, { waitMs: 5000 });
    expect((decided.reply?.payload as TaskAckPayload).state).toBe(TaskState.HUMAN_APPROVED);
    expect(decided.task?.state).toBe(TaskState.COMPLETED);
    const output = fromValue(decided.task?.result?.output) as { top_words: unknown[] };
    expect(output.top_words).toHaveLength(1);
  });

  it("approve resumes the task", async () => {
    const { taskId } = await client.submit("text_analysis", { text: TEXT, require_approval: true }, { waitMs: 5000 });
    const decided = await client.decide(taskId, { action: "approve", fields: { approved: true } }, { waitMs: 5000 });
    expect(decided.task?.state).toBe(TaskState.COMPLETED);
  });

  it("a rejection ends the task as failed with human_rejected", async () => {
    const { taskId } = await client.submit("summarization", { text: TEXT, max_sentences: 1, require_approval: true }, { waitMs: 5000 });
    const decided = await client.decide(taskId, { action: "reject", rejectionReason: "not today" }, { waitMs: 5000 });
    expect((decided.reply?.payload as TaskAckPayload).state).toBe(TaskState.HUMAN_REJECTED);
    expect(decided.task?.state).toBe(TaskState.FAILED);
    expect(decided.task?.error).toMatchObject({ code: ErrorCode.HUMAN_REJECTED, message: "not today" });
    const log = await events(taskId);
    expect(log.slice(-3).map((e) => e.state)).toEqual([TaskState.NEED_HUMAN, TaskState.HUMAN_REJECTED, TaskState.FAILED]);
  });

  it("a task_ack from the requester marks the decision as being taken up", async () => {
    const { taskId } = await client.submit("text_analysis", { text: TEXT, require_approval: true }, { waitMs: 5000 });
    const ack = await client.acknowledge(taskId);
    expect(ack.task?.state).toBe(TaskState.HUMAN_DECIDING);
    const decided = await client.decide(taskId, { action: "approve" }, { waitMs: 5000 });
    expect(decided.task?.state).toBe(TaskState.COMPLETED);
  });
});

describe("progress", () => {
  it("records a slow handler's progress, at most one status update per interval", async () => {
    const csv = ["n", ...Array.from({ length: 8 }, (_, i) => String(i))].join("\n");
    const { taskId } = await client.submit("data_analysis", { csv, delay_ms_per_row: 150 }, { waitMs: 10_000 });
    const log = await events(taskId);
    const updates = log.filter((e) => e.event.type === MessageType.TASK_STATUS_UPDATE);
    // A report per row, 150 ms apart: each is told (the last, 100%, is said by the completion).
    expect(updates.length).toBeGreaterThanOrEqual(5);
    expect(updates.map((e) => (e.event.payload as unknown as { progress: number }).progress)).toEqual([...updates.map((e) => (e.event.payload as unknown as { progress: number }).progress)].sort((a, b) => a - b));
  });

  it("coalesces rapid reports into the latest one", async () => {
    const csv = ["n", ...Array.from({ length: 400 }, (_, i) => String(i))].join("\n");
    const { taskId, task } = await client.submit("data_analysis", { csv, delay_ms_per_row: 1 }, { waitMs: 10_000 });
    expect(task?.state).toBe(TaskState.COMPLETED);
    const updates = (await events(taskId)).filter((e) => e.event.type === MessageType.TASK_STATUS_UPDATE);
    // 400 reports over about half a second: a handful of events, not 400.
    expect(updates.length).toBeLessThan(20);
  });
});

describe("cancel flow", () => {
  it("answers task_ack, aborts the running handler, and ends the task cancelled", async () => {
    const csv = ["n", ...Array.from({ length: 100 }, (_, i) => String(i))].join("\n");
    const { taskId } = await client.submit("data_analysis", { csv, delay_ms_per_row: 50 });
    for await (const item of client.watch(taskId)) {
      if (item.kind === "event" && item.state === TaskState.EXECUTING && item.sequence >= 3) break;
    }
    const cancelled = await client.cancel(taskId, "changed my mind");
    expect(cancelled.reply?.type).toBe(MessageType.TASK_ACK);
    expect((cancelled.reply?.payload as TaskAckPayload)).toMatchObject({ acknowledgedType: MessageType.TASK_CANCEL, state: TaskState.CANCELLED });
    expect(cancelled.task?.state).toBe(TaskState.CANCELLED);
    const progressAtCancel = cancelled.task!.progress;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const later = await client.getTask(taskId);
    expect(later.state).toBe(TaskState.CANCELLED);
    expect(later.error?.code).toBe(ErrorCode.TASK_CANCELLED);
    // The handler stopped: no progress was recorded after the cancel.
    expect(later.progress).toBe(progressAtCancel);
    const log = await events(taskId);
    expect(log.at(-1)?.event.type).toBe(MessageType.TASK_ACK);
    expect(Number(later.lastSequence)).toBe(log.length);
  });

  it("refuses to cancel a finished task with task_already_completed", async () => {
    const { taskId } = await client.submit("text_analysis", { text: "Done." }, { waitMs: 5000 });
    const error = await client.cancel(taskId).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 9 /* FAILED_PRECONDITION */ });
  });
});

describe("non-task messages", () => {
  it("answers a heartbeat with a heartbeat", async () => {
    const { reply } = await client.sendEnvelope(client.envelope(MessageType.HEARTBEAT, create(HeartbeatPayloadSchema, { status: AgentStatus.READY })));
    expect(reply?.type).toBe(MessageType.HEARTBEAT);
    const beat = reply?.payload as HeartbeatPayload;
    expect(beat.status).toBe(AgentStatus.READY);
    expect(beat.maxConcurrentTasks).toBe(10);
  });

  it("answers a capability query, filtered by task type", async () => {
    const { reply } = await client.sendEnvelope(
      client.envelope(MessageType.CAPABILITY_QUERY, create(CapabilityQueryPayloadSchema, { taskTypes: ["summarization"], includeInterfaces: true })),
    );
    expect(reply?.type).toBe(MessageType.CAPABILITY_RESPONSE);
    const response = reply?.payload as CapabilityResponsePayload;
    expect(response.capabilities?.supportedTaskTypes.map((t) => t.type)).toEqual(["summarization"]);
    expect(response.interfaces.map((i) => i.name)).toContain("P2PTaskHandler");
  });

  it("takes an ack without a reply", async () => {
    const { AckPayloadSchema } = await import("../gen/synapse/v1/payloads_pb.js");
    const result = await client.sendEnvelope(client.envelope(MessageType.ACK, create(AckPayloadSchema, { acknowledgedMessageId: "m" })));
    expect(result.reply).toBeUndefined();
  });
});
