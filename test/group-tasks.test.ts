// Group tasks (GroupTaskHandler) through real `synapse serve` processes: the
// host runs each sub-task as a real P2P task at a member. Member C runs with
// a one-second task timeout, so the slow input fails there (a member that
// fails), and is stopped at the end (a member that cannot be reached).
import { create, fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupDecisionAction, GroupEventKind, GroupTaskCancelPayloadSchema, GroupTaskState, GroupTaskStrategy, GroupTaskSubmitPayloadSchema } from "../gen/synapse/v1/a2n_pb.js";
import { HeaderSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import type { GroupTask } from "../gen/synapse/v1/group_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { GroupClient, GroupTaskInput } from "../src/client/group-client.js";
import { SynapseClient } from "../src/client/requester.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { inviteAll, startGroupAgents, stopAll, userClient, type GroupAgent } from "./helpers/group-agents.js";
import { verifies } from "./helpers/independent-verify.js";
import { fromValue } from "../src/protocol/json-values.js";

let agents: GroupAgent[];
let host: GroupAgent;
let a: GroupAgent;
let b: GroupAgent;
let c: GroupAgent;
let lead: GroupClient;
let keys: Map<string, Uint8Array>;

// Three rows at 600 ms each: 1.8 s, past C's one-second task timeout.
const slow = { csv: "n\n1\n2\n3", delay_ms_per_row: 600 };
const WAIT = 20_000;

beforeAll(async () => {
  agents = await startGroupAgents(4, [[], [], [], ["--task-timeout", "1"]]);
  [host, a, b, c] = agents as [GroupAgent, GroupAgent, GroupAgent, GroupAgent];
  lead = await userClient(host.url);
  await lead.create("workers");
  await inviteAll(lead, "workers", [a, b, c]);
  keys = new Map((await lead.getGroup("workers")).group!.members.map((member) => [member.agent!.agentId, member.publicKey]));
}, 30_000);
afterAll(async () => stopAll(agents));

const members = (...agentsUsed: GroupAgent[]) => agentsUsed.map((agent) => agent.ref.agentId);

/** A refused call as [status, protocol code, details.rule or details.field]. */
async function refusal(call: Promise<unknown>, key: "rule" | "field" = "rule"): Promise<[Code, string | undefined, unknown]> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "the call should have been refused").toBeInstanceOf(ConnectError);
  const detail = findErrorDetail(error);
  return [(error as ConnectError).code, detail?.protocolCode, (detail?.details as Record<string, unknown> | undefined)?.[key]];
}

/** Every output carries the member's signed task_complete: it verifies with that member's key, addressed to the host. */
function checkSignedOutputs(task: GroupTask): void {
  for (const output of task.outputs) {
    const envelope = output.taskComplete!.envelope!;
    const header = fromBinary(HeaderSchema, envelope.header);
    expect(header.messageType).toBe(MessageType.TASK_COMPLETE);
    expect(header.sender?.agentId).toBe(output.agentId);
    expect(header.receiver?.agentId).toBe(host.ref.agentId);
    expect(header.taskId).toBe(output.subtaskId);
    expect(verifies(envelope, keys.get(output.agentId)!)).toBe(true);
  }
}

describe("broadcast", () => {
  it("runs at every member and completes with every output, each signed by its member", async () => {
    const sent = await lead.submitTask("workers", { groupTaskId: "hello", taskType: "text_analysis", payload: { text: "Groups work. Members sign." }, strategy: GroupTaskStrategy.BROADCAST }, WAIT);
    const task = sent.groupTask!;
    expect(task.state).toBe(GroupTaskState.COMPLETED);
    expect(task.outputs.map((output) => output.agentId)).toEqual(members(a, b, c));
    expect(task.outputs.every((output) => JSON.stringify(output.output).includes("characters"))).toBe(true);
    checkSignedOutputs(task);
  });

  it("seals each sub-task to its member when the group task is confidential, and still gathers every output", async () => {
    const sent = await lead.submitTask(
      "workers",
      { groupTaskId: "sealed", taskType: "text_analysis", payload: { text: "Sealed groups work. Only members read." }, strategy: GroupTaskStrategy.BROADCAST, members: members(a, b), confidential: true },
      WAIT,
    );
    const task = sent.groupTask!;
    expect(task.state).toBe(GroupTaskState.COMPLETED);
    expect(task.outputs.map((output) => output.agentId)).toEqual(members(a, b));
    // The host opened each member's sealed task_complete: the outputs are there, the envelopes as they travelled.
    expect(task.outputs.every((output) => JSON.stringify(output.output).includes("characters"))).toBe(true);
    for (const output of task.outputs) {
      const header = fromBinary(HeaderSchema, output.taskComplete!.envelope!.header);
      expect(header.confidential?.taskKeyId).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(header.receiver?.agentId).toBe(host.ref.agentId);
    }
    // Two sub-tasks, two task keys: one HPKE message per member.
    expect(new Set(task.outputs.map((output) => fromBinary(HeaderSchema, output.taskComplete!.envelope!.header).confidential!.taskKeyId)).size).toBe(2);
  });

  it("fails with the partial results when a member fails, after the others finished", async () => {
    const task = (await lead.submitTask("workers", { groupTaskId: "slow-all", taskType: "data_analysis", payload: slow, strategy: GroupTaskStrategy.BROADCAST }, WAIT)).groupTask!;
    expect(task.state).toBe(GroupTaskState.FAILED);
    expect(task.outputs.map((output) => output.agentId)).toEqual(members(a, b));
    checkSignedOutputs(task);
    const atC = task.subtasks.find((subtask) => subtask.ref?.agentId === c.ref.agentId)!;
    expect(atC.state).toBe(TaskState.FAILED);
    expect(atC.outcome?.view?.payload?.body.case).toBe("taskFailed");
    expect(task.reason).toContain(c.ref.agentId);
    // The members' progress reached the group's log as their own signed status updates.
    const updates: string[] = [];
    for await (const item of lead.watch("workers", { fromSequence: 1 })) {
      if (item.kind === "heartbeat") break;
      if (item.kind !== "event") continue;
      const { payload } = item.event;
      if (payload.kind === GroupEventKind.SUBTASK_EVENT && payload.subjectId === "slow-all" && payload.memberEvent) {
        const header = fromBinary(HeaderSchema, payload.memberEvent.header);
        if (header.messageType === MessageType.TASK_STATUS_UPDATE) updates.push(header.sender!.agentId);
        expect(verifies(payload.memberEvent, keys.get(header.sender!.agentId)!)).toBe(true);
      }
      if (payload.kind === GroupEventKind.GROUP_TASK_FINISHED && payload.subjectId === "slow-all") break;
    }
    expect(new Set(updates)).toEqual(new Set(members(a, b, c)));
  });
});

describe("quorum", () => {
  it("completes when k of n completed, however the rest fare", async () => {
    const task = (await lead.submitTask("workers", { groupTaskId: "two-of-three", taskType: "data_analysis", payload: slow, strategy: GroupTaskStrategy.QUORUM, quorum: 2 }, WAIT)).groupTask!;
    expect(task).toMatchObject({ state: GroupTaskState.COMPLETED, required: 2, completed: 2 });
    expect(task.outputs.map((output) => output.agentId).sort()).toEqual(members(a, b).sort());
    checkSignedOutputs(task);
  });

  it("fails as soon as k can no longer be reached, and cancels the rest", async () => {
    const task = (await lead.submitTask("workers", { groupTaskId: "all-three", taskType: "data_analysis", payload: slow, strategy: GroupTaskStrategy.QUORUM, quorum: 3 }, WAIT)).groupTask!;
    expect(task.state).toBe(GroupTaskState.FAILED);
    expect(task.reason).toContain("only 0 of the 3");
    const others = task.subtasks.filter((subtask) => subtask.ref?.agentId !== c.ref.agentId);
    expect(others.every((subtask) => subtask.finished && subtask.lostReason.startsWith("cancelled"))).toBe(true);
  });
});

describe("shard", () => {
  it("deals the shards to free members, retries a failed shard on another member, and keeps shard order", async () => {
    const shards = [{ csv: "n\n1\n2" }, { csv: "n\n3\n4" }, { ...slow, csv: "n\n5\n6\n7" }, { csv: "n\n8" }];
    // Shard 2 is slow: wherever it lands on C it fails there and moves on.
    const task = (await lead.submitTask("workers", { groupTaskId: "sums", taskType: "data_analysis", shards, strategy: GroupTaskStrategy.SHARD, members: members(c, a, b) }, WAIT)).groupTask!;
    expect(task.state).toBe(GroupTaskState.COMPLETED);
    expect(task.outputs.map((output) => output.slot)).toEqual([0, 1, 2, 3]);
    expect(task.outputs.map((output) => (fromValue(output.output) as { columns: { n: { min: number } } }).columns.n.min)).toEqual([1, 3, 5, 8]);
    checkSignedOutputs(task);
    expect(task.outputs[2]!.agentId).not.toBe(c.ref.agentId);
    // C failed at most the shards it was dealt, and got none after failing one.
    const atC = task.subtasks.filter((subtask) => subtask.ref?.agentId === c.ref.agentId);
    expect(atC.filter((subtask) => subtask.state === TaskState.FAILED).length).toBeLessThanOrEqual(1);
  });

  it("fails a shard that failed at max_attempts members, with the results of the others", async () => {
    const shards = [{ csv: "n\n1" }, slow];
    const task = (await lead.submitTask("workers", { groupTaskId: "no-retry", taskType: "data_analysis", shards, strategy: GroupTaskStrategy.SHARD, members: members(c), maxAttempts: 1 }, WAIT)).groupTask!;
    expect(task.state).toBe(GroupTaskState.FAILED);
    expect(task.reason).toContain("shard 1 failed 1 time(s)");
    expect(task.outputs.map((output) => output.slot)).toEqual([0]);
  });
});

describe("questions and answers", () => {
  it("surfaces a member's need-info at the group task and forwards the coordinator's answer", async () => {
    const sent = await lead.submitTask("workers", { groupTaskId: "summary", taskType: "summarization", payload: { text: "One. Two. Three. Four." }, strategy: GroupTaskStrategy.BROADCAST, members: members(a) }, WAIT);
    const waiting = sent.groupTask!;
    expect(waiting.state).toBe(GroupTaskState.WAITING);
    const subtask = waiting.subtasks[0]!;
    expect(subtask).toMatchObject({ state: TaskState.INFO_NEEDED });
    expect(subtask.pendingInfo?.missingFields.map((field) => field.field)).toEqual(["max_sentences"]);
    const answered = await lead.answer("workers", "summary", subtask.ref!.subtaskId, { info: { max_sentences: 2 } }, "two will do", WAIT);
    expect(answered.reply.payload.kind).toBe(GroupEventKind.GROUP_TASK_ANSWERED);
    expect(answered.groupTask?.state).toBe(GroupTaskState.COMPLETED);
    checkSignedOutputs(answered.groupTask!);
  });

  it("surfaces a need-human and forwards the decision; a wrong kind of answer is refused", async () => {
    const sent = await lead.submitTask("workers", { groupTaskId: "approval", taskType: "text_analysis", payload: { text: "ok", require_approval: true }, strategy: GroupTaskStrategy.BROADCAST, members: members(b) }, WAIT);
    const subtask = sent.groupTask!.subtasks[0]!;
    expect(subtask.state).toBe(TaskState.NEED_HUMAN);
    await expect(lead.answer("workers", "approval", subtask.ref!.subtaskId, { info: { x: 1 } })).rejects.toMatchObject({ code: Code.InvalidArgument });
    // Only a coordinator answers.
    await expect(b.client.answer("workers", "approval", subtask.ref!.subtaskId, { decision: { action: GroupDecisionAction.APPROVE } })).rejects.toMatchObject({ code: Code.PermissionDenied });
    const approved = await lead.answer("workers", "approval", subtask.ref!.subtaskId, { decision: { action: GroupDecisionAction.APPROVE } }, "", WAIT);
    expect(approved.groupTask?.state).toBe(GroupTaskState.COMPLETED);
  });
});

describe("ending group tasks", () => {
  it("times a sub-task out at the host and cancels it", async () => {
    const task = (await lead.submitTask("workers", { groupTaskId: "impatient", taskType: "data_analysis", payload: slow, strategy: GroupTaskStrategy.BROADCAST, members: members(a), memberTimeoutMs: 500 }, WAIT)).groupTask!;
    expect(task.state).toBe(GroupTaskState.FAILED);
    expect(task.subtasks[0]!.lostReason).toMatch(/timed out/);
  });

  it("is cancelled by a coordinator, and its running sub-tasks with it", async () => {
    await lead.submitTask("workers", { groupTaskId: "stop-me", taskType: "data_analysis", payload: { csv: "n\n1\n2\n3\n4", delay_ms_per_row: 3000 }, strategy: GroupTaskStrategy.BROADCAST, members: members(a, b) });
    const cancelled = await lead.cancelTask("workers", "stop-me", "changed my mind");
    expect(cancelled.groupTask).toMatchObject({ state: GroupTaskState.CANCELLED, reason: "changed my mind" });
    expect(cancelled.groupTask!.subtasks.every((subtask) => subtask.finished)).toBe(true);
  });

  it("tells the member its slot and attempt as numbers, in the task id and the metadata", async () => {
    // The host is the sub-task's requester: reading it at member B as the host shows the request B got.
    const asHost = await SynapseClient.connect({ baseUrl: b.url, identity: host.identity });
    const subtask = await asHost.getTask("hello.1.1");
    expect(subtask.request?.context?.metadata).toEqual({ group_id: "workers", group_task_id: "hello", slot: 1, attempt: 1 });
    expect(subtask.request?.context).toMatchObject({ sessionId: "workers", parentTaskId: "hello", correlationId: "hello" });
  });

  it("refuses an answer or a cancel once the group task is over", async () => {
    const over = (await lead.getGroupTask("workers", "hello"));
    expect(over.state).toBe(GroupTaskState.COMPLETED);
    expect(await refusal(lead.answer("workers", "hello", "hello.0.1", { info: { x: 1 } }))).toEqual([Code.FailedPrecondition, "illegal_transition", "group_task_over"]);
    expect(await refusal(lead.cancelTask("workers", "hello"))).toEqual([Code.FailedPrecondition, "illegal_transition", "group_task_over"]);
  });

  it("refuses submits whose terms do not hold, naming the field", async () => {
    const submit = (groupTaskId: string, input: Omit<GroupTaskInput, "groupTaskId" | "taskType">) => lead.submitTask("workers", { groupTaskId, taskType: "text_analysis", ...input });
    const field = [Code.InvalidArgument, "invalid_params"];
    expect(await refusal(submit("x1", { strategy: GroupTaskStrategy.BROADCAST, shards: [{ text: "a" }] }), "field")).toEqual([...field, "shards"]);
    expect(await refusal(submit("x2", { strategy: GroupTaskStrategy.SHARD, shards: [] }), "field")).toEqual([...field, "shards"]);
    expect(await refusal(submit("x3", { strategy: GroupTaskStrategy.SHARD, shards: Array.from({ length: 257 }, () => ({ text: "a" })) }), "field")).toEqual([...field, "shards"]);
    expect(await refusal(submit("x4", { strategy: GroupTaskStrategy.QUORUM, quorum: 4, payload: { text: "a" } }), "field")).toEqual([...field, "quorum"]);
    expect(await refusal(submit("x5", { strategy: GroupTaskStrategy.QUORUM, quorum: 3, members: members(a, b), payload: { text: "a" } }), "field")).toEqual([...field, "quorum"]);
    expect(await refusal(submit("x6", { strategy: GroupTaskStrategy.BROADCAST, members: [a.ref.agentId, lead.agentId], payload: { text: "a" } }), "field")).toEqual([...field, "members"]);
    expect(await refusal(submit("x7", { strategy: GroupTaskStrategy.BROADCAST, members: ["agent_nobody"], payload: { text: "a" } }), "field")).toEqual([...field, "members"]);
    // Header.task_id and group_task_id name one group task, in a submit and in a cancel.
    const payload = create(GroupTaskSubmitPayloadSchema, { groupId: "workers", groupTaskId: "x8", taskType: "text_analysis", strategy: GroupTaskStrategy.BROADCAST, payload: { text: "a" } });
    expect(await refusal(lead.send(lead.envelope(MessageType.A2N_GROUP_TASK_SUBMIT, payload, "x9"), "workers"), "field")).toEqual([...field, "group_task_id"]);
    await lead.submitTask("workers", { groupTaskId: "keep-running", taskType: "data_analysis", payload: { csv: "n\n1\n2", delay_ms_per_row: 3000 }, strategy: GroupTaskStrategy.BROADCAST, members: members(a) });
    const cancel = create(GroupTaskCancelPayloadSchema, { groupId: "workers", groupTaskId: "keep-running" });
    expect(await refusal(lead.send(lead.envelope(MessageType.A2N_GROUP_TASK_CANCEL, cancel, "hello"), "workers"), "field")).toEqual([...field, "group_task_id"]);
    expect((await lead.getGroupTask("workers", "keep-running")).state).toBe(GroupTaskState.RUNNING);
    expect((await lead.cancelTask("workers", "keep-running")).groupTask?.state).toBe(GroupTaskState.CANCELLED);
  });

  it("moves a shard on when its member cannot be reached", async () => {
    await c.serve.stop();
    const task = (await lead.submitTask("workers", { groupTaskId: "gone", taskType: "data_analysis", shards: [{ csv: "n\n1" }, { csv: "n\n2" }], strategy: GroupTaskStrategy.SHARD, members: members(c, a) }, WAIT)).groupTask!;
    expect(task.state).toBe(GroupTaskState.COMPLETED);
    const lost = task.subtasks.filter((subtask) => subtask.ref?.agentId === c.ref.agentId);
    expect(lost.length).toBe(1);
    expect(lost[0]!.lostReason).toMatch(/member unavailable/);
    expect(task.outputs.every((output) => output.agentId === a.ref.agentId)).toBe(true);
  });
});
