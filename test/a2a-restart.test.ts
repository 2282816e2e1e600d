// A2A tasks survive kill -9: `synapse serve` (SQLite) is killed with
// SIGKILL while A2A tasks wait for information, for a human, or were just
// submitted, and started again on the same data dir; the @a2a-js/sdk gRPC
// client finds every task, the same messageId still names the same task,
// and each task is answered and completes.
import { Role, TaskState, type Message, type Part, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { afterAll, describe, expect, it } from "vitest";
import type { AgentIdentity } from "../src/agent/identity.js";
import { issueToken } from "../src/crypto/tokens.js";
import { startServe, type ServeProcess } from "./helpers/cli.js";
import { requesterIdentity, tempDir } from "./helpers/server.js";

const part = (content: Part["content"]): Part => ({ content, metadata: undefined, filename: "", mediaType: "" });
const message = (parts: Part[], extra: { taskId?: string; metadata?: Record<string, unknown>; messageId?: string } = {}): Message => ({
  messageId: extra.messageId ?? randomUUID(),
  contextId: "",
  taskId: extra.taskId ?? "",
  role: Role.ROLE_USER,
  parts,
  metadata: extra.metadata,
  extensions: [],
  referenceTaskIds: [],
});

let served: ServeProcess | undefined;
afterAll(async () => {
  await served?.stop("SIGKILL");
});

async function connect(url: string): Promise<Client> {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new GrpcTransportFactory()] }));
  return factory.createFromUrl(url);
}

describe("A2A tasks through kill -9 of synapse serve", () => {
  it("loses none: waiting tasks are answered after the restart, submitted ones complete", async () => {
    const dataDir = await tempDir();
    served = await startServe(["--data-dir", dataDir]);
    const alice: AgentIdentity = await requesterIdentity();
    const as = async (agentId: string) => ({ serviceParameters: { authorization: `Bearer ${await issueToken(alice.key, { agentId: alice.agentId, audience: agentId })}` } });
    let client = await connect(served.url);
    const send = async (msg: Message, returnImmediately = false) =>
      (await client.sendMessage({ tenant: "", message: msg, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately }, metadata: undefined }, await as(served!.agentId))) as Task;

    const text = "One sentence here. Another sentence there. A third one too.";
    const asking = [];
    for (let i = 0; i < 5; i++) asking.push(await send(message([part({ $case: "text", value: text })], { metadata: { taskType: "summarization" } })));
    for (const task of asking) expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const gated = await send(message([part({ $case: "data", value: { text, require_approval: true } })]));
    expect(gated.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    // A webhook for one of the waiting tasks: it hears input-required now, completed after the restart, each once.
    const notified: string[] = [];
    const hook = http.createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString()));
      req.on("end", () => {
        const state = (JSON.parse(body) as { statusUpdate?: { status?: { state?: string } } }).statusUpdate?.status?.state;
        if (state !== undefined) notified.push(state);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => hook.listen(0, "127.0.0.1", resolve));
    const hookUrl = `http://127.0.0.1:${(hook.address() as { port: number }).port}/`;
    const watched = asking[0]!;
    await client.createTaskPushNotificationConfig({ tenant: "", id: "hook", taskId: watched.id, url: hookUrl, token: "", authentication: undefined }, await as(served.agentId));
    const firstMessage = message([part({ $case: "text", value: "counted after the crash" })]);
    const submitted = [await send(firstMessage, true)];
    for (let i = 0; i < 9; i++) submitted.push(await send(message([part({ $case: "text", value: `task ${i} in flight` })]), true));

    await served.stop("SIGKILL");
    served = await startServe(["--data-dir", dataDir]);
    client = await connect(served.url);
    const read = async (id: string) => client.getTask({ tenant: "", id, historyLength: undefined }, await as(served!.agentId));

    // The same messageId is the same task after the restart.
    expect((await send(firstMessage, true)).id).toBe(submitted[0]!.id);
    for (const task of submitted) {
      let state = (await read(task.id)).status?.state;
      for (let i = 0; i < 100 && state !== TaskState.TASK_STATE_COMPLETED; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        state = (await read(task.id)).status?.state;
      }
      expect(state).toBe(TaskState.TASK_STATE_COMPLETED);
    }
    for (const task of asking) {
      expect((await read(task.id)).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const done = await send(message([part({ $case: "data", value: { max_sentences: 1 } })], { taskId: task.id }));
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    }
    expect((await read(gated.id)).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const approved = await send(message([part({ $case: "data", value: { decision: "approve" } })], { taskId: gated.id }));
    expect(approved.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    for (let i = 0; i < 100 && !notified.includes("TASK_STATE_COMPLETED"); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    hook.close();
    expect(notified.filter((state) => state === "TASK_STATE_COMPLETED")).toHaveLength(1);
    expect(new Set(notified).size).toBe(notified.length);
  }, 60_000);
});
