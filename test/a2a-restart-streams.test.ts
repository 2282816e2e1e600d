// A2A tasks running when `synapse serve` (SQLite, A2A open mode) is killed
// with SIGKILL, driven by the @a2a-js/sdk JSON-RPC client: after the restart
// on the same data dir every task is found and completes, a stream that the
// kill dropped is taken up again with SubscribeToTask and delivers the rest,
// and a webhook set before the kill hears the completion once.
import { Role, TaskState, type AgentCard, type Message, type StreamResponse, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client } from "@a2a-js/sdk/client";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { afterAll, describe, expect, it } from "vitest";
import { A2A_JSONRPC_PATH } from "../src/a2a/jsonrpc.js";
import { startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

const ROWS = 30;
const DELAY_MS_PER_ROW = 100;
const TASKS = 6;
const CSV = ["n,square", ...Array.from({ length: ROWS }, (_, i) => `${i},${i * i}`)].join("\n");

const analysis = (): Message => ({
  messageId: randomUUID(),
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "data", value: { csv: CSV, delay_ms_per_row: DELAY_MS_PER_ROW } }, metadata: undefined, filename: "", mediaType: "" }],
  metadata: { taskType: "data_analysis" },
  extensions: [],
  referenceTaskIds: [],
});

let served: ServeProcess | undefined;
afterAll(async () => {
  await served?.stop("SIGKILL");
});

/** `synapse serve` on `dataDir`: open A2A, and a short run lease so the restarted server takes the killed one's runs at once. */
const serve = (dataDir: string) => startServe(["--data-dir", dataDir, "--a2a-open", "--run-lease", "1"]);

/**
 * The SDK's JSON-RPC client on the server's card. The card `synapse serve`
 * signs lists its gRPC interface only so far, so the JSON-RPC interface it
 * serves at /a2a/jsonrpc is named in the client's copy.
 */
async function jsonRpcClient(url: string): Promise<Client> {
  const card = (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as AgentCard;
  const jsonRpc = { url: `${url}${A2A_JSONRPC_PATH}`, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ["JSONRPC"] }));
  return factory.createFromAgentCard({ ...card, supportedInterfaces: [jsonRpc, ...card.supportedInterfaces] });
}

/** A loopback webhook that keeps the A2A state of every status update it is sent. */
async function webhook(): Promise<{ url: string; states: string[]; close(): void }> {
  const states: string[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      const state = (JSON.parse(body) as { statusUpdate?: { status?: { state?: string } } }).statusUpdate?.status?.state;
      if (state !== undefined) states.push(state);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/`, states, close: () => server.close() };
}

const stateOf = (item: StreamResponse): TaskState | undefined => {
  const payload = item.payload;
  if (payload?.$case === "task") return payload.value.status?.state;
  if (payload?.$case === "statusUpdate") return payload.value.status?.state;
  return undefined;
};

describe("A2A tasks in flight through kill -9, over JSON-RPC", () => {
  it("loses none, resumes a dropped stream with SubscribeToTask, and notifies the webhook once", async () => {
    const dataDir = await tempDir();
    served = await serve(dataDir);
    let client = await jsonRpcClient(served.url);
    const hook = await webhook();
    try {
      const tasks: Task[] = [];
      for (let i = 0; i < TASKS; i++) {
        const answer = (await client.sendMessage({ tenant: "", message: analysis(), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true }, metadata: undefined })) as Task;
        tasks.push(answer);
      }
      const watched = tasks[0]!;
      await client.createTaskPushNotificationConfig({ tenant: "", id: "hook", taskId: watched.id, url: hook.url, token: "", authentication: undefined });

      // A stream on the watched task, dropped by the kill once the task is working.
      const before: StreamResponse[] = [];
      const dropped = (async () => {
        for await (const item of client.resubscribeTask({ tenant: "", id: watched.id })) before.push(item);
      })().then(
        () => undefined,
        (error: unknown) => error,
      );
      for (let i = 0; i < 100 && !before.some((item) => stateOf(item) === TaskState.TASK_STATE_WORKING); i++) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(before.map(stateOf)).toContain(TaskState.TASK_STATE_WORKING);
      // Still running when killed: each run takes ROWS * DELAY_MS_PER_ROW.
      expect((await client.getTask({ tenant: "", id: watched.id, historyLength: 0 })).status?.state).toBe(TaskState.TASK_STATE_WORKING);

      await served.stop("SIGKILL");
      expect(await dropped).toBeDefined(); // the stream ended with an error, not with the task
      expect(before.some((item) => stateOf(item) === TaskState.TASK_STATE_COMPLETED)).toBe(false);

      served = await serve(dataDir);
      client = await jsonRpcClient(served.url);

      // The dropped stream, taken up again: the task, then the rest up to its end, result included.
      const after: StreamResponse[] = [];
      for await (const item of client.resubscribeTask({ tenant: "", id: watched.id })) after.push(item);
      expect(after[0]?.payload?.$case).toBe("task");
      expect(after[0]?.payload?.$case === "task" && after[0].payload.value.id).toBe(watched.id);
      const artifact = after.find((item) => item.payload?.$case === "artifactUpdate");
      expect(artifact?.payload?.$case === "artifactUpdate" && artifact.payload.value.artifact?.parts[0]?.content).toMatchObject({ $case: "data", value: { rows: ROWS } });
      expect(stateOf(after.at(-1)!)).toBe(TaskState.TASK_STATE_COMPLETED);

      // Not one lost: every task is found and completes with its result.
      for (const task of tasks) {
        let read = await client.getTask({ tenant: "", id: task.id, historyLength: 0 });
        for (let i = 0; i < 200 && read.status?.state !== TaskState.TASK_STATE_COMPLETED; i++) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          read = await client.getTask({ tenant: "", id: task.id, historyLength: 0 });
        }
        expect(read.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(read.artifacts[0]?.parts[0]?.content).toMatchObject({ $case: "data", value: { rows: ROWS } });
      }

      // The webhook hears the completion after the restart, once.
      for (let i = 0; i < 200 && !hook.states.includes("TASK_STATE_COMPLETED"); i++) await new Promise((resolve) => setTimeout(resolve, 50));
      await new Promise((resolve) => setTimeout(resolve, 500)); // time for a second delivery, were there one
      expect(hook.states.filter((state) => state === "TASK_STATE_COMPLETED")).toHaveLength(1);
    } finally {
      hook.close();
    }
  }, 90_000);

  // The SSE bindings carry Last-Event-ID to the service, but the service does not yet tag its stream events with resume points.
  it.todo("resumes SubscribeToTask after the restart from Last-Event-ID with only the events after it");
});
