// EscalationHandler through a real server: text_analysis declares an
// escalation policy (level 1 the requester, level 2 and level 3 one named
// contact each, short deadlines). An unanswered decision climbs 1 → 2 → 3,
// each level a new signed task_need_human with its own decision id,
// deadline and deciders, and after the last the task fails with
// execution_timeout. Deciders outside the level are refused (another party:
// PERMISSION_DENIED; a contact not yet named: the task does not exist for
// it), and the level-2 contact decides, reads and watches the task.
import { create } from "@bufbuild/protobuf";
import { durationFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EscalationPolicySchema, SupportedTaskTypeSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { TaskState, type TaskNeedHumanPayload } from "../gen/synapse/v1/payloads_pb.js";
import { REFERENCE_TASK_TYPES } from "../src/agent/reference/task-types.js";
import type { SynapseClient } from "../src/client/requester.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { connectClient, requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

const LEVEL_MS = 400;

async function refusal(attempt: Promise<unknown>): Promise<ConnectError> {
  return ConnectError.from(await attempt.then(() => new Error("expected a refusal"), (error: unknown) => error));
}

/** Polls the task (as `client`) until `check` holds. */
async function until(client: SynapseClient, taskId: string, check: (task: Awaited<ReturnType<SynapseClient["getTask"]>>) => boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const task = await client.getTask(taskId);
    if (check(task)) return task;
    if (Date.now() > deadline) throw new Error(`timed out; the task is ${TaskState[task.state]} at level ${task.pendingDecision?.escalationLevel}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("escalation of an unanswered human decision", () => {
  let server: TestServer;
  let requester: SynapseClient;
  let manager: SynapseClient;
  let executive: SynapseClient;

  beforeAll(async () => {
    // The contacts are agents with self-certifying ids, as trust on first use requires.
    const [managerIdentity, executiveIdentity] = await Promise.all([requesterIdentity(), requesterIdentity()]);
    const [managerId, executiveId] = [managerIdentity!.agentId, executiveIdentity!.agentId];
    const escalation = create(EscalationPolicySchema, {
      levels: [
        { requester: true, timeout: durationFromMs(LEVEL_MS) },
        { agentIds: [managerId!], timeout: durationFromMs(LEVEL_MS) },
        { agentIds: [executiveId!], timeout: durationFromMs(LEVEL_MS) },
      ],
    });
    const taskTypes = REFERENCE_TASK_TYPES.map((taskType) => (taskType.type === "text_analysis" ? create(SupportedTaskTypeSchema, { ...taskType, escalation }) : taskType));
    server = await startTestServer({ capabilities: { supportedTaskTypes: taskTypes } });
    requester = await connectClient(server);
    manager = await connectClient(server, { identity: managerIdentity });
    executive = await connectClient(server, { identity: executiveIdentity });
  });
  afterAll(async () => {
    await server?.close();
  });

  const ask = () => requester.submit("text_analysis", { text: "Approve me. Please.", require_approval: true }, { waitMs: 5_000 });

  it("declares the policy with the task type", async () => {
    const declared = server.agent.provider.getTaskTypeCapabilities("text_analysis");
    expect(declared.escalation?.levels.map((level) => [level.requester, level.agentIds])).toEqual([
      [true, []],
      [false, [manager.agentId]],
      [false, [executive.agentId]],
    ]);
  });

  it("climbs level 1 → 2 → 3, refuses the wrong deciders, and fails after the last level", async () => {
    const { taskId, task } = await ask();
    expect(task?.state).toBe(TaskState.NEED_HUMAN);
    expect(task?.pendingDecision).toMatchObject({ escalationLevel: 1, deciders: [requester.agentId] });
    // Not named yet: the task does not exist for the level-2 contact.
    expect((await refusal(manager.getTask(taskId))).code).toBe(Code.NotFound);

    const level2 = await until(requester, taskId, (t) => t.pendingDecision?.escalationLevel === 2);
    expect(level2.pendingDecision?.deciders).toEqual([manager.agentId]);
    expect(level2.pendingDecision?.decisionId).not.toBe(task?.pendingDecision?.decisionId);
    expect(timestampMs(level2.pendingDecision!.deadline!)).toBeGreaterThan(timestampMs(task!.pendingDecision!.deadline!));
    // The requester is a party but not a decider at level 2.
    const byRequester = await refusal(requester.decide(taskId, { action: "approve" }));
    expect(byRequester.code).toBe(Code.PermissionDenied);
    expect(findErrorDetail(byRequester)).toMatchObject({ protocolCode: "permission_denied", details: { escalation_level: 2, deciders: [manager.agentId] } });
    // The level-3 contact is not named yet: the task does not exist for it.
    const early = await refusal(executive.decide(taskId, { action: "approve" }));
    expect(findErrorDetail(early)?.protocolCode).toBe("task_not_found");
    // The level-2 contact may read it now, and cannot cancel it.
    expect((await manager.getTask(taskId)).pendingDecision?.escalationLevel).toBe(2);
    expect(findErrorDetail(await refusal(manager.cancel(taskId)))?.protocolCode).toBe("permission_denied");

    const level3 = await until(requester, taskId, (t) => t.pendingDecision?.escalationLevel === 3);
    expect(level3.pendingDecision?.deciders).toEqual([executive.agentId]);
    // The level-2 contact has had its turn.
    expect((await refusal(manager.decide(taskId, { action: "approve" }))).code).toBe(Code.PermissionDenied);

    const failed = await until(requester, taskId, (t) => t.state === TaskState.FAILED);
    expect(failed.error).toMatchObject({ code: ErrorCode.EXECUTION_TIMEOUT, recoverable: true });
    expect(failed.error?.message).toBe("no human decision at escalation level 3 before its deadline");
    expect(failed.statusMessage).toBe(failed.error?.message);
    // The log: three signed need_human events, levels 1, 2, 3, then the failure (the client checks every step).
    const events = [];
    for await (const item of requester.watch(taskId)) if (item.kind === "event") events.push(item.event);
    const asked = events.filter((event) => event.type === MessageType.TASK_NEED_HUMAN).map((event) => event.payload as TaskNeedHumanPayload);
    expect(asked.map((payload) => payload.escalationLevel)).toEqual([1, 2, 3]);
    expect(new Set(asked.map((payload) => payload.decisionId)).size).toBe(3);
    expect(events.at(-1)?.type).toBe(MessageType.TASK_FAILED);
  }, 20_000);

  it("lets the level-2 contact approve, and read and watch the task it decided", async () => {
    const { taskId } = await ask();
    await until(requester, taskId, (t) => t.pendingDecision?.escalationLevel === 2);
    const decided = await manager.decide(taskId, { action: "approve", notes: "fine by me", decidedBy: { role: "manager" } }, { waitMs: 5_000 });
    // The reply is the task's event, signed by the executor and addressed to the requester: the contact's client verifies it as such.
    expect(decided.reply?.type).toBe(MessageType.TASK_ACK);
    expect(decided.task?.state).toBe(TaskState.COMPLETED);
    const done = await requester.getTask(taskId);
    expect(done.result?.output).toBeDefined();
    // The contact still reads the task it decided, and its whole log.
    expect((await manager.getTask(taskId)).state).toBe(TaskState.COMPLETED);
    let last: TaskState | undefined;
    for await (const item of manager.watch(taskId)) if (item.kind === "event") last = item.state;
    expect(last).toBe(TaskState.COMPLETED);
    // A decision for a task with nothing pending changes nothing.
    expect((await refusal(manager.decide(taskId, { action: "approve" }))).code).toBe(Code.FailedPrecondition);
  }, 20_000);
});
