// Operator keys (`synapse serve --operator KEY_ID`): a bearer token signed by
// one reads every task (GetTask, ListTasks, Watch, ReadResult) and steers
// none; everyone else still reads only the tasks it requested, and cannot
// tell another requester's task from a task id never used. Through real
// sockets, in gRPC and gRPC-web (the console's protocol).
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { DecisionAction, HumanDecisionPayloadSchema, TaskAckPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import type { SynapseClient } from "../src/client/requester.js";
import { generateKey } from "../src/crypto/keys.js";
import { issueToken } from "../src/crypto/tokens.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { connectClient, requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

const EXECUTOR = "executor_operator";

let server: TestServer;
let operator: AgentIdentity;
let requester: SynapseClient;
let stranger: AgentIdentity;
/** A completed text_analysis, a summarization waiting for information, a data_analysis with a result stream. */
const tasks = { done: "", waiting: "", streamed: "" };

beforeAll(async () => {
  // The operator's identity has the self-certifying id of its key, as `synapse keygen` makes it.
  operator = await requesterIdentity();
  stranger = await requesterIdentity();
  server = await startTestServer({ agentId: EXECUTOR, operators: [operator.key.keyId] });
  requester = await connectClient(server);
  tasks.done = (await requester.submit("text_analysis", { text: "Operators read. Requesters steer." }, { waitMs: 10_000 })).taskId;
  tasks.waiting = (await requester.submit("summarization", { text: "One. Two. Three." })).taskId;
  tasks.streamed = (await requester.submit("data_analysis", { csv: "a,b\n1,2\n3,4\n", include_rows: true }, { waitMs: 10_000 })).taskId;
});
afterAll(() => server?.close());

async function bearer(identity: AgentIdentity): Promise<Record<string, string>> {
  return { Authorization: `Bearer ${await issueToken(identity.key, { agentId: identity.agentId, audience: EXECUTOR })}` };
}

async function refusal(attempt: Promise<unknown>): Promise<{ code: Code; protocolCode?: string; message: string }> {
  const error = await attempt.then(
    () => {
      throw new Error("expected a refusal");
    },
    (e: unknown) => e,
  );
  const connectError = ConnectError.from(error);
  return { code: connectError.code, protocolCode: findErrorDetail(connectError)?.protocolCode, message: connectError.rawMessage };
}

async function drain<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of stream) items.push(item);
  return items;
}

const protocols: Array<[string, () => Transport]> = [
  ["gRPC", () => createGrpcTransport({ baseUrl: server.url })],
  ["gRPC-web", () => createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" })],
];

describe.each(protocols)("operator keys over %s", (_name, transport) => {
  let p2p: ReturnType<typeof createClient<typeof P2PService>>;
  beforeAll(() => {
    p2p = createClient(P2PService, transport());
  });

  it("lets an operator key read another requester's tasks: GetTask, Watch, ReadResult", async () => {
    const headers = await bearer(operator);
    const { task } = await p2p.getTask({ taskId: tasks.done }, { headers });
    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(task?.requester?.agentId).toBe(requester.agentId);

    const items = await drain(p2p.watch({ taskId: tasks.done, fromSequence: 1n }, { headers }));
    expect(items[0]?.kind.case).toBe("snapshot");
    const events = items.filter((item) => item.kind.case === "event");
    expect(events.length).toBeGreaterThanOrEqual(2);
    // The same signed events the requester reads: addressed to the requester, not to the operator.
    const last = events.at(-1)!.kind.value as { message?: { view?: { header?: { receiver?: { agentId: string }; messageType: MessageType } } } };
    expect(last.message?.view?.header?.receiver?.agentId).toBe(requester.agentId);
    expect(last.message?.view?.header?.messageType).toBe(MessageType.TASK_COMPLETE);

    const chunks = (await drain(p2p.readResult({ taskId: tasks.streamed, offset: 0n }, { headers }))).map((response) => response.chunk!);
    const data = Buffer.concat(chunks.map((chunk) => chunk.data));
    expect(chunks.at(-1)?.last).toBe(true);
    expect(createHash("sha256").update(data).digest()).toEqual(Buffer.from(chunks.at(-1)!.sha256));
  });

  it("lists every requester's tasks for an operator, and only the caller's own for anyone else", async () => {
    const own = await connectClient(server, { identity: stranger });
    const mine = (await own.submit("text_analysis", { text: "A stranger's own task." }, { waitMs: 10_000 })).taskId;
    const all = await p2p.listTasks({ pageSize: 500 }, { headers: await bearer(operator) });
    const ids = all.tasks.map((task) => task.taskId);
    expect(ids).toEqual(expect.arrayContaining([tasks.done, tasks.waiting, tasks.streamed, mine]));
    const strangers = await p2p.listTasks({ pageSize: 500 }, { headers: await bearer(stranger) });
    expect(strangers.tasks.every((task) => task.requester?.agentId === stranger.agentId)).toBe(true);
    expect(strangers.tasks.map((task) => task.taskId)).toContain(mine);
    expect(strangers.tasks.map((task) => task.taskId)).not.toContain(tasks.done);
  });

  it("filters ListTasks by task type and state, for operators and requesters alike", async () => {
    const summaries = await p2p.listTasks({ taskTypes: ["summarization"], pageSize: 500 }, { headers: await bearer(operator) });
    expect(summaries.tasks.length).toBeGreaterThan(0);
    expect(summaries.tasks.every((task) => task.taskType === "summarization")).toBe(true);
    const waiting = await requester.listTasks({ taskTypes: ["summarization", "data_analysis"], states: [TaskState.INFO_NEEDED] });
    expect(waiting.tasks.map((task) => task.taskId)).toEqual([tasks.waiting]);
    const none = await requester.listTasks({ taskTypes: ["no_such_type"] });
    expect(none.tasks).toEqual([]);
  });

  it("refuses a stranger exactly as for a task id never used", async () => {
    const headers = await bearer(stranger);
    const missing = "no-such-task";
    const reads = (taskId: string) => [
      p2p.getTask({ taskId }, { headers }),
      drain(p2p.watch({ taskId, fromSequence: 1n }, { headers })),
      drain(p2p.readResult({ taskId, offset: 0n }, { headers })),
    ];
    const absent = await Promise.all(reads(missing).map(refusal));
    for (const taskId of [tasks.done, tasks.waiting, tasks.streamed]) {
      const foreign = await Promise.all(reads(taskId).map(refusal));
      expect(foreign.map((r) => ({ ...r, message: r.message.replace(taskId, missing) }))).toEqual(absent);
    }
    expect(absent.every((r) => r.code === Code.NotFound && r.protocolCode === "task_not_found")).toBe(true);
  });

  it("is decided by the signing key, not by the agent id a token names", async () => {
    // The operator's agent id with another key: the token does not verify for that id.
    const impostor = generateKey();
    const claimed = await issueToken(impostor, { agentId: operator.agentId, audience: EXECUTOR });
    expect(await refusal(p2p.getTask({ taskId: tasks.done }, { headers: { Authorization: `Bearer ${claimed}` } }))).toMatchObject({ code: Code.Unauthenticated });
    // An id of its own, signed by its own key: a stranger, nothing more.
    const own = await issueToken(impostor, { agentId: `agent_${createHash("sha256").update(impostor.publicKey).digest("hex").slice(0, 32)}`, audience: EXECUTOR });
    expect(await refusal(p2p.getTask({ taskId: tasks.done }, { headers: { Authorization: `Bearer ${own}` } }))).toMatchObject({ code: Code.NotFound });
  });
});

describe("operator keys steer nothing", () => {
  it("refuses an operator's cancel, information, decision and ack as for a task it cannot see", async () => {
    const asOperator = await connectClient(server, { identity: operator });
    const gated = (await requester.submit("text_analysis", { text: "Approve me.", require_approval: true }, { waitMs: 10_000 })).taskId;
    expect((await requester.getTask(gated)).state).toBe(TaskState.NEED_HUMAN);
    const decision = create(HumanDecisionPayloadSchema, { taskId: gated, decision: { action: DecisionAction.APPROVE } });
    // One at a time: each refusal is awaited as it is made.
    const attempts: Array<[string, () => Promise<unknown>]> = [
      [tasks.waiting, () => asOperator.cancel(tasks.waiting, "not mine")],
      [tasks.waiting, () => asOperator.provideInfo(tasks.waiting, { max_sentences: 1 })],
      [gated, () => asOperator.sendEnvelope(asOperator.envelope(MessageType.HUMAN_DECISION, decision, { taskId: gated }))],
      [gated, () => asOperator.sendEnvelope(asOperator.envelope(MessageType.TASK_ACK, create(TaskAckPayloadSchema, { taskId: gated }), { taskId: gated }))],
    ];
    for (const [taskId, attempt] of attempts) {
      expect(await refusal(attempt())).toMatchObject({ code: Code.NotFound, protocolCode: "task_not_found", message: `no task ${taskId}` });
    }
    // Both still wait for their requester, who may answer them.
    expect((await requester.getTask(tasks.waiting)).state).toBe(TaskState.INFO_NEEDED);
    expect((await requester.getTask(gated)).state).toBe(TaskState.NEED_HUMAN);
    expect((await requester.provideInfo(tasks.waiting, { max_sentences: 1 }, { waitMs: 10_000 })).task?.state).toBe(TaskState.COMPLETED);
    expect((await requester.decide(gated, { action: "reject", rejectionReason: "no" }, { waitMs: 10_000 })).task?.state).toBe(TaskState.FAILED);
  });
});
