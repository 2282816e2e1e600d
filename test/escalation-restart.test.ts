// Escalation across a crash: `synapse serve` on its SQLite store with an
// escalation policy from the command line (--escalate-after,
// --escalation-contact). A decision escalates to level 2, the process is
// killed with SIGKILL, level 2's deadline passes while it is down, and the
// agent started again on the same store escalates to level 3 at once (the
// level and deadline come from the store). The level-3 contact approves,
// the task completes, and the log shows levels 1, 2, 3 once each.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState, type TaskNeedHumanPayload } from "../gen/synapse/v1/payloads_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { SynapseClient } from "../src/client/requester.js";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { requesterIdentity, tempDir } from "./helpers/server.js";

const LEVEL = "2s";

async function until<T>(what: string, read: () => Promise<T>, check: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("escalation across a kill -9 (synapse serve, SQLite)", () => {
  let serve: ServeProcess | undefined;
  afterAll(async () => {
    await serve?.stop();
  });

  it("keeps the level and deadline in the store and goes on escalating after a restart", async () => {
    const dataDir = join(await tempDir("synapse-escalation-"), "agent");
    const [requesterId, manager, executive] = await Promise.all([requesterIdentity(), requesterIdentity(), requesterIdentity()]);
    const args = ["--data-dir", dataDir, "--escalate-after", LEVEL, "--escalation-contact", `2=${manager.agentId}`, "--escalation-contact", `3=${executive.agentId}`, "--log-level", "warn"];
    serve = await startServe(args);
    const connect = (identity: AgentIdentity) => SynapseClient.connect({ baseUrl: serve!.url, identity, retryBaseDelayMs: 50 });

    // The policy is declared where the task type is.
    const declared = await runCli(["capabilities", serve.url]);
    expect(declared.stdout).toContain(`escalation 1: requester (2 s); 2: ${manager.agentId} (2 s); 3: ${executive.agentId} (2 s)`);

    const client = await connect(requesterId);
    const { taskId, task } = await client.submit("text_analysis", { text: "Approve me. Please.", require_approval: true }, { waitMs: 5_000 });
    expect(task?.pendingDecision).toMatchObject({ escalationLevel: 1, deciders: [requesterId.agentId] });
    const level2 = await until("level 2", () => client.getTask(taskId), (t) => t.pendingDecision?.escalationLevel === 2);
    expect(level2.pendingDecision?.deciders).toEqual([manager.agentId]);

    // The crash; level 2's deadline passes while nobody runs.
    await serve.stop("SIGKILL");
    serve = undefined;
    const deadline = timestampMs(level2.pendingDecision!.deadline!);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now()) + 200));
    serve = await startServe(args);

    const after = await connect(requesterId);
    const level3 = await until("level 3", () => after.getTask(taskId), (t) => t.pendingDecision?.escalationLevel === 3);
    expect(level3.pendingDecision?.deciders).toEqual([executive.agentId]);
    expect(timestampMs(level3.pendingDecision!.deadline!)).toBeGreaterThan(deadline);

    // The level-3 contact approves: the task runs (its handler resumes) and completes.
    const decided = await (await connect(executive)).decide(taskId, { action: "approve" }, { waitMs: 10_000 });
    expect(decided.task?.state).toBe(TaskState.COMPLETED);
    const levels = [];
    for await (const item of after.watch(taskId)) {
      if (item.kind === "event" && item.event.type === MessageType.TASK_NEED_HUMAN) levels.push((item.event.payload as TaskNeedHumanPayload).escalationLevel);
    }
    expect(levels).toEqual([1, 2, 3]);
  }, 45_000);
});
