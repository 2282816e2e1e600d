// What a restart means (docs/PROTOCOL.md §5.9), tried as an operator would:
// 1,000 tasks in flight in every running and waiting state, with callbacks
// still to deliver, the agent process killed with SIGKILL and started again
// on the same SQLite store. Every task is found and ends as documented,
// every event log is gapless and signed, no handler that cannot resume ran
// twice, pending callbacks arrive in order and once, and a request sent
// before the crash is not taken again.
import { create, fromBinary, type JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HeaderSchema, MessageType, type Envelope } from "../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import type { Task } from "../gen/synapse/v1/p2p_pb.js";
import { TaskRequestPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { SynapseClient } from "../src/client/requester.js";
import { seal } from "../src/envelope/seal.js";
import { fromValue } from "../src/protocol/json-values.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { callbackReceiver, startAgentProcess, tcpGate, type AgentProcess } from "./helpers/agent-process.js";
import { requesterIdentity, tempDir } from "./helpers/server.js";

type Kind = "sleepOnce" | "sleepAgain" | "infoOnce" | "humanAgain" | "admissionInfo" | "approval" | "callback";

/** How many tasks of each kind, and what they are: 1,000 in all. */
const PLAN: Record<Kind, { count: number; type: string; payload: JsonObject; before: TaskState }> = {
  sleepOnce: { count: 200, type: "work_once", payload: { mode: "sleep", ms: 600_000 }, before: TaskState.EXECUTING },
  sleepAgain: { count: 150, type: "work_again", payload: { mode: "sleep", ms: 600_000, ms_resumed: 200 }, before: TaskState.EXECUTING },
  infoOnce: { count: 120, type: "work_once", payload: { mode: "info" }, before: TaskState.INFO_NEEDED },
  humanAgain: { count: 120, type: "work_again", payload: { mode: "human" }, before: TaskState.NEED_HUMAN },
  admissionInfo: { count: 120, type: "summarization", payload: { text: "One. Two. Three. Four." }, before: TaskState.INFO_NEEDED },
  approval: { count: 120, type: "text_analysis", payload: { text: "Approve me. Please.", require_approval: true }, before: TaskState.NEED_HUMAN },
  callback: { count: 170, type: "work_again", payload: { mode: "sleep", ms: 0 }, before: TaskState.COMPLETED },
};

/** Runs `work` over `items`, `width` at a time. */
async function inParallel<T, R>(items: readonly T[], width: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await work(items[index]!);
      }
    }),
  );
  return results;
}

async function allTasks(client: SynapseClient): Promise<Map<string, Task>> {
  const found = new Map<string, Task>();
  let pageToken = "";
  do {
    const page = await client.listTasks({ pageSize: 500, pageToken });
    for (const task of page.tasks) found.set(task.taskId, task);
    pageToken = page.nextPageToken;
  } while (pageToken);
  return found;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const runsOf = async (log: string) => {
  const counts = new Map<string, number[]>();
  for (const line of (await readFile(log, "utf8")).split("\n").filter(Boolean)) {
    const [taskId, , attempt] = line.split(" ");
    counts.set(taskId!, [...(counts.get(taskId!) ?? []), Number(attempt)]);
  }
  return counts;
};

describe("a crash with 1,000 tasks in flight (SQLite, kill -9)", () => {
  let dataDir: string;
  let runs: string;
  let agent: AgentProcess;
  let identity: AgentIdentity;
  let executorKey: Uint8Array = new Uint8Array();
  let receiver: Awaited<ReturnType<typeof callbackReceiver>>;
  let gate: Awaited<ReturnType<typeof tcpGate>>;
  const ids = new Map<Kind, string[]>();
  let sentBefore: Envelope;
  const args = () => ["--data-dir", dataDir, "--runs", runs, "--port", String(agent?.port ?? 0)];

  beforeAll(async () => {
    dataDir = await tempDir("synapse-crash-");
    runs = join(dataDir, "runs.log");
    identity = await requesterIdentity();
    agent = await startAgentProcess(args());
    receiver = await callbackReceiver(() => executorKey);
    gate = await tcpGate(receiver.port);
  }, 60_000);
  afterAll(async () => {
    await agent?.kill("SIGTERM");
    await gate?.close();
    await receiver?.close();
  });

  it("survives the crash: every task is found and ends as documented, nothing runs twice that may not", async () => {
    const client = await SynapseClient.connect({ baseUrl: agent.url, identity, transport: { protocol: "grpc" }, retryBaseDelayMs: 50 });
    executorKey = client.executor.publicKey;
    // A task whose events are pushed to callback_url (the gate, closed until after the restart).
    const submitWithCallback = async (type: string, payload: JsonObject) => {
      const taskId = randomUUID();
      const request = create(TaskRequestPayloadSchema, { task: { id: taskId, type, payload }, callbackUrl: gate.url });
      await client.sendEnvelope(client.envelope(MessageType.TASK_REQUEST, request, { taskId }), 10_000);
      return { taskId };
    };

    // 1,000 tasks, each left where its kind leaves it.
    for (const [kind, plan] of Object.entries(PLAN) as Array<[Kind, (typeof PLAN)[Kind]]>) {
      const waitMs = plan.before === TaskState.EXECUTING ? undefined : 10_000;
      const submit = () => (kind === "callback" ? submitWithCallback(plan.type, plan.payload) : client.submit(plan.type, plan.payload, { waitMs }));
      const submitted = await inParallel(Array.from({ length: plan.count }), 32, submit);
      ids.set(kind, submitted.map((s) => s.taskId));
    }
    // One signed request kept as it was sent, to send again after the restart.
    const request = create(TaskRequestPayloadSchema, { task: { id: "kept-request", type: "text_analysis", payload: { text: "Once only." } } });
    sentBefore = client.envelope(MessageType.TASK_REQUEST, request, { taskId: "kept-request" });
    expect((await client.sendEnvelope(sentBefore, 10_000)).task?.state).toBe(TaskState.COMPLETED);

    let lastSeen = "";
    await until("every task in its state", async () => {
      const tasks = await allTasks(client);
      lastSeen = JSON.stringify([...ids].map(([kind, list]) => [kind, list.filter((id) => tasks.get(id)?.state !== PLAN[kind].before).map((id) => TaskState[tasks.get(id)?.state ?? 0]).slice(0, 3)]));
      return [...ids].every(([kind, list]) => list.every((id) => tasks.get(id)?.state === PLAN[kind].before));
    }).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${lastSeen}`);
    });
    const runsBefore = await runsOf(runs);

    // The crash, and a start on the same store.
    await agent.kill("SIGKILL");
    agent = await startAgentProcess(args());
    const after = await SynapseClient.connect({ baseUrl: agent.url, identity, transport: { protocol: "grpc" }, retryBaseDelayMs: 50 });

    // Every task is there.
    const found = await allTasks(after);
    expect(found.size).toBe(1001);

    // Running, cannot resume: failed agent_not_ready (recoverable), never run again.
    await until("the interrupted tasks to end", async () => {
      const tasks = await allTasks(after);
      return [...ids.get("sleepOnce")!, ...ids.get("sleepAgain")!].every((id) => [TaskState.FAILED, TaskState.COMPLETED].includes(tasks.get(id)!.state));
    });
    const tasks = await allTasks(after);
    for (const id of ids.get("sleepOnce")!) {
      expect(tasks.get(id)).toMatchObject({ state: TaskState.FAILED, error: { code: ErrorCode.AGENT_NOT_READY, recoverable: true } });
    }
    // Running, resumable: ran again from its input, and completed.
    for (const id of ids.get("sleepAgain")!) {
      expect(tasks.get(id)?.state).toBe(TaskState.COMPLETED);
      expect(fromValue(tasks.get(id)?.result?.output)).toEqual({ attempt: 2 });
    }
    // Waiting: still waiting, with what they asked.
    for (const kind of ["infoOnce", "humanAgain", "admissionInfo", "approval"] as const) {
      for (const id of ids.get(kind)!) expect(tasks.get(id)?.state).toBe(PLAN[kind].before);
    }

    // Answered after the restart: each ends as documented.
    const infoOnce = await inParallel(ids.get("infoOnce")!, 16, (id) => after.provideInfo(id, { extra: "late" }, { waitMs: 10_000 }));
    for (const outcome of infoOnce) expect(outcome.task).toMatchObject({ state: TaskState.FAILED, error: { code: ErrorCode.AGENT_NOT_READY, recoverable: true } });
    const humanAgain = await inParallel(ids.get("humanAgain")!, 16, (id) => after.decide(id, { action: "approve" }, { waitMs: 10_000 }));
    for (const outcome of humanAgain) {
      expect(outcome.task?.state).toBe(TaskState.COMPLETED);
      // The resumed run got the recorded approval back instead of asking again.
      expect(fromValue(outcome.task?.result?.output)).toEqual({ attempt: 2, decided: "approve" });
    }
    const admission = await inParallel(ids.get("admissionInfo")!, 16, (id) => after.provideInfo(id, { max_sentences: 2 }, { waitMs: 10_000 }));
    for (const outcome of admission) expect(outcome.task?.state).toBe(TaskState.COMPLETED);
    const approval = await inParallel(ids.get("approval")!, 16, (id) => after.decide(id, { action: "approve" }, { waitMs: 10_000 }));
    for (const outcome of approval) expect(outcome.task?.state).toBe(TaskState.COMPLETED);

    // No handler that cannot resume ran twice; resumable ones ran once more each.
    const runsAfter = await runsOf(runs);
    for (const id of [...ids.get("sleepOnce")!, ...ids.get("infoOnce")!]) expect(runsAfter.get(id)).toEqual([1]);
    for (const id of ids.get("sleepAgain")!) expect(runsAfter.get(id)).toEqual([1, 2]);
    for (const id of ids.get("humanAgain")!) expect(runsAfter.get(id)).toEqual([1, 2]);
    expect(runsBefore.get(ids.get("sleepOnce")![0]!)).toEqual([1]);

    // Every event log is gapless, every event signed by the executor and a legal step (the client checks both).
    await inParallel([...found.keys()], 16, async (id) => {
      let expected = 1;
      for await (const item of after.watch(id)) {
        if (item.kind !== "event") continue;
        expect(item.sequence).toBe(expected++);
      }
      expect(expected).toBeGreaterThan(1);
    });
    // A resumed human task asked its human once.
    const humanLog = [];
    for await (const item of after.watch(ids.get("humanAgain")![0]!)) if (item.kind === "event") humanLog.push(item.event.type);
    expect(humanLog.filter((type) => type === MessageType.TASK_NEED_HUMAN)).toHaveLength(1);

    // Callbacks that could not be delivered before the crash arrive after it: in order, none twice.
    expect(receiver.deliveries).toHaveLength(0);
    gate.open();
    const callbackIds = ids.get("callback")!;
    const lastOf = new Map([...(await allTasks(after))].map(([id, task]) => [id, Number(task.lastSequence)]));
    // Deliveries backed off while the gate was shut: the next attempts may be a while away.
    await until("every callback", async () => callbackIds.every((id) => receiver.deliveries.filter((d) => d.taskId === id).length >= lastOf.get(id)!), 120_000);
    await new Promise((resolve) => setTimeout(resolve, 500)); // a twin, if any, would arrive now
    for (const id of callbackIds) {
      const every = Array.from({ length: lastOf.get(id)! }, (_, i) => i + 1);
      expect(every.length).toBeGreaterThanOrEqual(2);
      expect(receiver.deliveries.filter((d) => d.taskId === id).map((d) => d.sequence)).toEqual(every);
    }

    // The request sent before the crash: the identical envelope gets its first reply and runs nothing;
    // another envelope with its message id is refused as a replay.
    const again = await after.sendEnvelope(sentBefore, 1_000);
    expect(again.reply?.header.sequence).toBe(1n);
    expect(again.task?.state).toBe(TaskState.COMPLETED);
    expect((await allTasks(after)).size).toBe(1001);
    const keptId = fromBinary(HeaderSchema, sentBefore.header).messageId;
    const other = create(TaskRequestPayloadSchema, { task: { id: "other", type: "text_analysis", payload: { text: "x" } } });
    const replay = seal({ messageType: MessageType.TASK_REQUEST, payload: other, sender: { agentId: identity.agentId }, receiver: after.executor, taskId: "other", messageId: keptId }, identity.key).envelope;
    const refusal = await after.sendEnvelope(replay).catch((error: unknown) => ConnectError.from(error));
    expect(refusal).toBeInstanceOf(ConnectError);
    expect((refusal as ConnectError).code).toBe(Code.AlreadyExists);
    expect(findErrorDetail(refusal)?.protocolCode).toBe("replay_detected");
  }, 240_000);
});
