// Two `synapse serve` instances of one agent on one PostgreSQL database
// serve the same A2A tasks: a task made at one is read and answered at the
// other, and a stream at one shows the events the other commits.
import { Role, TaskState, type Message, type Part, type StreamResponse, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentIdentity } from "../src/agent/identity.js";
import { issueToken } from "../src/crypto/tokens.js";
import { startServe, type ServeProcess } from "./helpers/cli.js";
import { freshDatabase, postgresAvailable } from "./helpers/postgres.js";
import { requesterIdentity, tempDir } from "./helpers/server.js";

const part = (content: Part["content"]): Part => ({ content, metadata: undefined, filename: "", mediaType: "" });
const message = (parts: Part[], extra: { taskId?: string; metadata?: Record<string, unknown> } = {}): Message => ({
  messageId: randomUUID(),
  contextId: "",
  taskId: extra.taskId ?? "",
  role: Role.ROLE_USER,
  parts,
  metadata: extra.metadata,
  extensions: [],
  referenceTaskIds: [],
});

describe.skipIf(!postgresAvailable())("A2A on two instances of one agent on one PostgreSQL database", () => {
  const instances: ServeProcess[] = [];
  const clients: Client[] = [];
  let alice: AgentIdentity;

  beforeAll(async () => {
    const store = await freshDatabase();
    const dataDir = await tempDir("synapse-a2a-instances-");
    // One data dir, one key: the same agent at both.
    instances.push(await startServe(["--data-dir", dataDir, "--store", store]));
    instances.push(await startServe(["--data-dir", dataDir, "--store", store]));
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new GrpcTransportFactory()] }));
    for (const instance of instances) clients.push(await factory.createFromUrl(instance.url));
    alice = await requesterIdentity();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.stop("SIGTERM")));
  });

  const as = async () => ({ serviceParameters: { authorization: `Bearer ${await issueToken(alice.key, { agentId: alice.agentId, audience: instances[0]!.agentId })}` } });

  it("streams at one instance the events of a task whose run waits at the other", async () => {
    expect(instances[0]!.agentId).toBe(instances[1]!.agentId);
    const [a, b] = clients as [Client, Client];
    const text = "First sentence here. Second sentence there. Third one too.";
    const ask = message([part({ $case: "text", value: text })], { metadata: { taskType: "summarization" } });
    const task = (await a.sendMessage({ tenant: "", message: ask, configuration: undefined, metadata: undefined }, await as())) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect((await b.getTask({ tenant: "", id: task.id, historyLength: undefined }, await as())).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    // The answer goes to B as a streaming message; the run waiting at A takes it, and B's stream shows what A commits.
    const answer = message([part({ $case: "data", value: { max_sentences: 1 } })], { taskId: task.id });
    const items: StreamResponse[] = [];
    for await (const item of b.sendMessageStream({ tenant: "", message: answer, configuration: undefined, metadata: undefined }, await as())) items.push(item);
    expect(items[0]?.payload?.$case).toBe("task");
    const last = items.at(-1)!.payload;
    expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(items.some((item) => item.payload?.$case === "artifactUpdate")).toBe(true);
  }, 30_000);

  it("reads at one instance what the other recorded", async () => {
    const [a, b] = clients as [Client, Client];
    // A task gated on a human, decided at A, read at B with its whole history.
    const task = (await a.sendMessage({ tenant: "", message: message([part({ $case: "data", value: { text: "Gate me. Please.", require_approval: true } })]), configuration: undefined, metadata: undefined }, await as())) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const decision = message([part({ $case: "data", value: { decision: "approve" } })], { taskId: task.id });
    const done = (await a.sendMessage({ tenant: "", message: decision, configuration: undefined, metadata: undefined }, await as())) as Task;
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const read = await b.getTask({ tenant: "", id: task.id, historyLength: undefined }, await as());
    expect(read.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(read.history.map((entry) => entry.role)).toEqual([Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER, Role.ROLE_AGENT]);
  }, 30_000);
});
