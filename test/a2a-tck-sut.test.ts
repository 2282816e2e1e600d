// The conformance kit's agent (examples/a2a-sut, built on the public API)
// as a real process on a real socket: it serves every A2A binding in open
// mode, its handler reads what to do from the A2A messageId, and the server
// behaviours the kit relies on hold (the JSON-RPC endpoint with a trailing
// slash, deleting a push config twice).
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let child: ChildProcess;
let url: string;

beforeAll(async () => {
  child = spawn(process.execPath, ["dist/examples/a2a-sut/agent.js", "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  for await (const chunk of child.stdout!) {
    out += String(chunk);
    const match = /listening on (http:\/\/\S+)/.exec(out);
    if (match) {
      url = match[1]!;
      break;
    }
  }
  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
}, 30_000);

afterAll(async () => {
  if (child.exitCode === null) {
    child.kill("SIGTERM");
    await once(child, "exit");
  }
});

const headers = { "Content-Type": "application/json", "A2A-Version": "1.0" };

async function rpc(path: string, method: string, params: unknown) {
  const response = await fetch(`${url}${path}`, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
  return { status: response.status, body: (await response.json()) as { result?: Record<string, any>; error?: { code: number; message: string } } };
}

const message = (messageId: string) => ({ message: { messageId, role: "ROLE_USER", parts: [{ text: "hi" }] } });

describe("the conformance kit's agent", () => {
  it("declares all three bindings at their URLs, open (no security requirement)", async () => {
    const card = (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as { supportedInterfaces: Array<{ url: string; protocolBinding: string }>; securityRequirements?: unknown[] };
    expect(card.supportedInterfaces.map((entry) => [entry.protocolBinding, entry.url])).toEqual([
      ["JSONRPC", `${url}/a2a/jsonrpc`],
      ["HTTP+JSON", `${url}/a2a/rest`],
      ["GRPC", url.replace("http://", "")],
    ]);
    expect(card.securityRequirements ?? []).toEqual([]);
  });

  it("serves the card with an ETag and Last-Modified, and answers a matching If-None-Match with 304", async () => {
    const first = await fetch(`${url}/.well-known/agent-card.json`);
    const etag = first.headers.get("etag");
    expect(etag).toMatch(/^"[\w-]{22}"$/);
    expect(Date.parse(first.headers.get("last-modified") ?? "")).toBeLessThanOrEqual(Date.now());
    expect((await fetch(`${url}/.well-known/agent-card.json`, { headers: { "If-None-Match": etag! } })).status).toBe(304);
    expect((await fetch(`${url}/.well-known/agent-card.json`, { headers: { "If-None-Match": '"other"' } })).status).toBe(200);
  });

  it("answers JSON-RPC at the endpoint with a trailing slash, and its handler sees the messageId", async () => {
    const done = await rpc("/a2a/jsonrpc/", "SendMessage", message(`tck-complete-task-${randomUUID()}`));
    expect(done.status).toBe(200);
    expect(done.body.result?.task?.status?.state).toBe("TASK_STATE_COMPLETED");
    expect(JSON.stringify(done.body.result?.task?.artifacts)).toContain("Hello from TCK");
    const other = await rpc("/a2a/jsonrpc", "SendMessage", message(`something-else-${randomUUID()}`));
    expect(other.body.result?.task?.artifacts?.[0]?.parts?.[0]?.text).toMatch(/^Hello World! Unhandled messageId prefix: something-else-/);
    // Without waiting, such a task is seen working first, and can be cancelled.
    const working = await rpc("/a2a/jsonrpc", "SendMessage", { ...message(`something-else-${randomUUID()}`), configuration: { returnImmediately: true } });
    const workingId = working.body.result!.task!.id as string;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await rpc("/a2a/jsonrpc", "GetTask", { id: workingId })).body.result?.status?.state).toBe("TASK_STATE_WORKING");
    expect((await rpc("/a2a/jsonrpc", "CancelTask", { id: workingId })).body.result?.status?.state).toBe("TASK_STATE_CANCELED");
    const rejected = await rpc("/a2a/jsonrpc/", "SendMessage", message(`tck-reject-task-${randomUUID()}`));
    expect(rejected.body.result?.task?.status?.state).toBe("TASK_STATE_REJECTED");
    const waiting = await rpc("/a2a/jsonrpc/", "SendMessage", message(`tck-input-required-${randomUUID()}`));
    expect(waiting.body.result?.task?.status?.state).toBe("TASK_STATE_INPUT_REQUIRED");
  });

  it("returns the handler's artifacts (text, file bytes, file URL, data) and a direct reply as a Message", async () => {
    const artifactsOf = async (prefix: string) => (await rpc("/a2a/jsonrpc", "SendMessage", message(`${prefix}-${randomUUID()}`))).body.result?.task?.artifacts as Array<{ parts: unknown[] }>;
    expect((await artifactsOf("tck-artifact-text"))[0]!.parts).toEqual([{ text: "Generated text content" }]);
    expect((await artifactsOf("tck-artifact-file"))[0]!.parts).toEqual([{ raw: Buffer.from("tck").toString("base64"), filename: "output.txt", mediaType: "text/plain" }]);
    expect((await artifactsOf("tck-artifact-file-url"))[0]!.parts).toEqual([{ url: "https://example.com/output.txt", filename: "output.txt", mediaType: "text/plain" }]);
    const data = await artifactsOf("tck-artifact-data");
    expect(data).toHaveLength(1);
    expect(data[0]!.parts).toEqual([{ data: { key: "value", count: 42 } }]);
    const reply = (await rpc("/a2a/jsonrpc", "SendMessage", message(`tck-message-response-${randomUUID()}`))).body.result;
    expect(reply?.task).toBeUndefined();
    expect(reply?.message).toMatchObject({ role: "ROLE_AGENT", parts: [{ text: "Direct message response" }] });
    // The task behind the reply is kept, with the reply marked in its result.
    const kept = await fetch(`${url}/a2a/rest/tasks/${reply!.message!.taskId as string}`, { headers });
    expect(((await kept.json()) as { status: { state: string } }).status.state).toBe("TASK_STATE_COMPLETED");
  });

  it("streams an artifact update before the completed status", async () => {
    const response = await fetch(`${url}/a2a/rest/message:stream`, { method: "POST", headers, body: JSON.stringify(message(`tck-stream-001-${randomUUID()}`)) });
    const events = (await response.text())
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => JSON.parse(line.slice(5)) as Record<string, any>);
    const artifact = events.findIndex((event) => event.artifactUpdate !== undefined);
    expect(events[artifact]!.artifactUpdate.artifact.parts).toEqual([{ text: "Stream hello from TCK" }]);
    expect(events.slice(artifact + 1).map((event) => event.statusUpdate?.status?.state)).toEqual(["TASK_STATE_COMPLETED"]);
  });

  it("deletes a push notification config idempotently, over REST and JSON-RPC, but not on another's or no task", async () => {
    const waiting = await rpc("/a2a/jsonrpc", "SendMessage", message(`tck-input-required-${randomUUID()}`));
    const taskId = waiting.body.result!.task!.id as string;
    const created = await fetch(`${url}/a2a/rest/tasks/${taskId}/pushNotificationConfigs`, {
      method: "POST",
      headers,
      body: JSON.stringify({ taskId, id: "cfg-1", url: "https://example.com/hook" }),
    });
    expect(created.status).toBe(200);
    for (let round = 0; round < 2; round++) {
      const deleted = await fetch(`${url}/a2a/rest/tasks/${taskId}/pushNotificationConfigs/cfg-1`, { method: "DELETE", headers });
      expect(deleted.status).toBe(200);
      expect(await deleted.json()).toEqual({});
    }
    expect((await rpc("/a2a/jsonrpc", "DeleteTaskPushNotificationConfig", { taskId, id: "cfg-1" })).body).toEqual({ jsonrpc: "2.0", id: 1, result: {} });
    const get = await fetch(`${url}/a2a/rest/tasks/${taskId}/pushNotificationConfigs/cfg-1`, { headers });
    expect(get.status).toBe(404);
    expect((await rpc("/a2a/jsonrpc", "DeleteTaskPushNotificationConfig", { taskId: randomUUID(), id: "cfg-1" })).body.error?.code).toBe(-32001);
  });
});
