// A2A's JSON-RPC binding (POST /a2a/jsonrpc) through real sockets, onto a
// fake A2AService: request validation, dispatch, every error mapping,
// versions and extensions, SSE streams, limits, HTTP/2, and the official
// @a2a-js/sdk JSON-RPC client.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClientFactory } from "@a2a-js/sdk/client";
import { SendMessageRequest } from "@a2a-js/sdk";
import { h2Request, readFramesUntil, sseFrames, startFakeA2AServer, V1, type FakeA2AServer } from "./helpers/a2a-http.js";
import { SUPPORTED_EXTENSION } from "./helpers/a2a-fake.js";
import { describeEngineFlows, startEngineServer } from "./helpers/a2a-engine.js";

let server: FakeA2AServer;
let endpoint: string;
beforeAll(async () => {
  server = await startFakeA2AServer({ maxFileSize: 4096, sseHeartbeatMs: 100 });
  endpoint = `${server.url}/a2a/jsonrpc`;
});
afterAll(() => server.close());

type Json = Record<string, any>;

const message = (text: string, extra: Json = {}) => ({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }], ...extra } });

async function post(body: unknown, headers: Record<string, string> = V1): Promise<{ status: number; headers: Headers; json: Json | undefined; text: string }> {
  const response = await fetch(endpoint, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
  const text = await response.text();
  let json: Json | undefined;
  try {
    json = JSON.parse(text) as Json;
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, json, text };
}

const rpc = (method: string, params?: unknown, id: unknown = 1) => ({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });

describe("requests and results", () => {
  it("dispatches by method name and answers ProtoJSON with the id echoed", async () => {
    const answer = await post(rpc("SendMessage", message("hello"), "req-7"));
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
    expect(answer.json).toMatchObject({ jsonrpc: "2.0", id: "req-7", result: { task: { status: { state: "TASK_STATE_COMPLETED", timestamp: "2026-01-02T03:04:05.678Z" } } } });
    const task = answer.json!.result.task;
    expect(task.artifacts[0].parts[0]).toEqual({ text: "echo: hello" });
    expect(task.history[0].role).toBe("ROLE_USER");
    const got = await post(rpc("GetTask", { id: task.id, historyLength: 0 }, 42));
    expect(got.json).toMatchObject({ id: 42, result: { id: task.id, contextId: task.contextId } });
    expect(server.fake.last("GetTask")!.request).toMatchObject({ id: task.id, historyLength: 0 });
    expect(server.fake.last("GetTask")!.protocol).toBe("jsonrpc");
  });

  it("ignores unknown fields, takes snake_case names and answers a Message result", async () => {
    const answer = await post(rpc("SendMessage", { message: { message_id: "x1", role: "ROLE_USER", parts: [{ text: "reply-with-message" }], futureField: 1 }, alsoUnknown: true }));
    expect(answer.json).toMatchObject({ id: 1, result: { message: { messageId: "r1", role: "ROLE_AGENT", parts: [{ text: "hi" }] } } });
  });

  it("answers a method without params, and DeleteTaskPushNotificationConfig's Empty as {}", async () => {
    expect((await post(rpc("GetExtendedAgentCard"))).json).toMatchObject({ result: { name: "fake", capabilities: { streaming: true } } });
    const task = (await post(rpc("SendMessage", message("cfg")))).json!.result.task;
    const created = await post(rpc("CreateTaskPushNotificationConfig", { taskId: task.id, url: "https://example.org/hook", token: "t" }));
    expect(created.json!.result).toMatchObject({ taskId: task.id, url: "https://example.org/hook", id: "cfg-1" });
    expect((await post(rpc("ListTaskPushNotificationConfigs", { taskId: task.id }))).json!.result.configs).toHaveLength(1);
    expect((await post(rpc("DeleteTaskPushNotificationConfig", { taskId: task.id, id: "cfg-1" }))).json).toEqual({ jsonrpc: "2.0", id: 1, result: {} });
  });

  it("passes the caller's headers and a connect-timeout-ms deadline to the service", async () => {
    await post(rpc("SendMessage", message("hdr")), { ...V1, Authorization: "Bearer abc", "connect-timeout-ms": "5000" });
    const seen = server.fake.last("SendMessage")!;
    expect(seen.headers.get("authorization")).toBe("Bearer abc");
    expect(seen.timeoutMs).toBeGreaterThan(4000);
    const late = await post(rpc("SendMessage", message("wait")), { ...V1, "connect-timeout-ms": "50" });
    expect(late.json!.error).toMatchObject({ code: -32000, data: [{ reason: "DEADLINE_EXCEEDED" }] });
    expect(server.fake.last("SendMessage")!.signal.aborted).toBe(true);
  });
});

describe("malformed requests", () => {
  it("answers -32700 for a body that is not JSON, with a null id", async () => {
    const answer = await post('{"jsonrpc": "2.0", "id": 1, "method": ');
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700, data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "PARSE_ERROR", domain: "a2a-protocol.org" }] } });
  });

  it("answers -32600 for requests that are not JSON-RPC 2.0", async () => {
    expect((await post({ jsonrpc: "1.0", id: 5, method: "GetTask" })).json).toMatchObject({ id: 5, error: { code: -32600 } });
    expect((await post({ jsonrpc: "2.0", id: 6 })).json).toMatchObject({ id: 6, error: { code: -32600 } });
    expect((await post({ jsonrpc: "2.0", id: { no: 1 }, method: "GetTask" })).json).toMatchObject({ id: null, error: { code: -32600 } });
    expect((await post("42")).json).toMatchObject({ id: null, error: { code: -32600 } });
  });

  it("answers -32601 for an unknown method and -32602 for params that do not parse", async () => {
    expect((await post(rpc("message/send", message("x")))).json).toMatchObject({ id: 1, error: { code: -32601, data: [{ reason: "METHOD_NOT_FOUND" }] } });
    const wrongType = await post(rpc("SendMessage", { message: { messageId: "m", role: "completed", parts: [] } }));
    expect(wrongType.json).toMatchObject({ id: 1, error: { code: -32602, data: [{ reason: "INVALID_PARAMS" }] } });
    expect(wrongType.json!.error.message).toMatch(/SendMessageRequest/);
    expect((await post(rpc("GetTask", ["task-1"]))).json).toMatchObject({ error: { code: -32602 } });
    expect((await post(rpc("GetTask", { id: 7 }))).json).toMatchObject({ error: { code: -32602 } });
  });

  it("refuses other HTTP methods, other content types and oversize bodies", async () => {
    const get = await fetch(endpoint, { headers: V1 });
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect(((await get.json()) as Json).error.code).toBe(-32600);
    const text = await fetch(endpoint, { method: "POST", headers: { ...V1, "Content-Type": "text/plain" }, body: JSON.stringify(rpc("GetTask", { id: "x" })) });
    expect(text.status).toBe(415);
    expect(((await text.json()) as Json).error).toMatchObject({ code: -32005, data: [{ reason: "CONTENT_TYPE_NOT_SUPPORTED" }] });
    // The server's limit is max_file_size (4096) + 64 KiB.
    const big = await post(rpc("SendMessage", message("x".repeat(80 * 1024))));
    expect(big.status).toBe(413);
    expect(big.json).toMatchObject({ id: null, error: { code: -32600 } });
    expect(big.json!.error.message).toMatch(/exceeds 69632 bytes/);
    // The connection and the server carry on.
    expect((await post(rpc("SendMessage", message("after")))).json!.result.task).toBeDefined();
  });
});

describe("errors", () => {
  const A2A_CODES: Array<[string, number, string]> = [
    ["TaskNotFound", -32001, "TASK_NOT_FOUND"],
    ["TaskNotCancelable", -32002, "TASK_NOT_CANCELABLE"],
    ["PushNotificationNotSupported", -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"],
    ["UnsupportedOperation", -32004, "UNSUPPORTED_OPERATION"],
    ["ContentTypeNotSupported", -32005, "CONTENT_TYPE_NOT_SUPPORTED"],
    ["InvalidAgentResponse", -32006, "INVALID_AGENT_RESPONSE"],
    ["ExtendedAgentCardNotConfigured", -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"],
    ["ExtensionSupportRequired", -32008, "EXTENSION_SUPPORT_REQUIRED"],
    ["VersionNotSupported", -32009, "VERSION_NOT_SUPPORTED"],
    ["InvalidParams", -32602, "INVALID_PARAMS"],
  ];
  it.each(A2A_CODES)("maps %s to %i with its ErrorInfo in data", async (kind, code, reason) => {
    const answer = await post(rpc("SendMessage", message(`fail:${kind}`), "e"));
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({
      jsonrpc: "2.0",
      id: "e",
      error: { code, message: `asked to fail with ${kind}`, data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "a2a-protocol.org", metadata: { asked: "yes" } }] },
    });
  });

  it("hides what an unexpected failure says, and a NOT_FOUND that names no A2A error", async () => {
    for (const text of ["boom", "not-found"]) {
      const answer = await post(rpc("SendMessage", message(text)));
      expect(answer.json!.error).toEqual({ code: -32603, message: "internal error", data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "INTERNAL", domain: "a2a-protocol.org" }] });
      expect(answer.text).not.toMatch(/secret|row 17/);
    }
  });

  it("maps a ConnectError without an A2A kind by its code", async () => {
    expect((await post(rpc("SendMessage", message("invalid-argument")))).json!.error).toMatchObject({ code: -32602, message: "the thing is not right" });
    const denied = await post(rpc("SendMessage", message("unauthenticated")));
    expect(denied.status).toBe(401);
    expect(denied.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(denied.json!.error).toMatchObject({ code: -32000, data: [{ reason: "UNAUTHENTICATED" }] });
  });
});

describe("notifications and batches", () => {
  it("runs a notification and answers 204 with no body", async () => {
    const before = server.fake.calls.length;
    const answer = await post({ jsonrpc: "2.0", method: "SendMessage", params: message("notified") });
    expect(answer.status).toBe(204);
    expect(answer.text).toBe("");
    expect(server.fake.calls.length).toBe(before + 1);
  });

  it("answers a batch with an array, leaving out notifications; streams cannot be batched", async () => {
    const answer = await post([
      rpc("SendMessage", message("b1"), 1),
      { jsonrpc: "2.0", method: "SendMessage", params: message("b2") },
      rpc("NoSuchMethod", {}, 3),
      rpc("SendStreamingMessage", message("b4"), 4),
      { nonsense: true },
    ]);
    expect(answer.status).toBe(200);
    expect(answer.json).toHaveLength(4);
    const [first, third, fourth, fifth] = answer.json as Json[];
    expect(first).toMatchObject({ id: 1, result: { task: {} } });
    expect(third).toMatchObject({ id: 3, error: { code: -32601 } });
    expect(fourth).toMatchObject({ id: 4, error: { code: -32600 } });
    expect(fifth).toMatchObject({ id: null, error: { code: -32600 } });
    expect((await post([])).json).toMatchObject({ id: null, error: { code: -32600 } });
    expect((await post(Array.from({ length: 33 }, (_, i) => rpc("GetTask", { id: "x" }, i)))).json).toMatchObject({ error: { code: -32600 } });
    expect((await post([{ jsonrpc: "2.0", method: "GetTask", params: { id: "x" } }])).status).toBe(204);
  });
});

describe("versions and extensions", () => {
  it("serves 1.0 (a patch number ignored, or from the query) and refuses anything else with -32009", async () => {
    expect((await post(rpc("SendMessage", message("v")), { "A2A-Version": "1.0.1" })).json!.result).toBeDefined();
    const query = await fetch(`${endpoint}?A2A-Version=1.0`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(rpc("SendMessage", message("q"))) });
    expect(((await query.json()) as Json).result).toBeDefined();
    for (const headers of [{} as Record<string, string>, { "A2A-Version": "" }, { "A2A-Version": "0.3" }, { "A2A-Version": "2.0" }, { "A2A-Version": "latest" }]) {
      const before = server.fake.calls.length;
      const answer = await post(rpc("SendMessage", message("v"), 9), headers);
      expect(answer.json).toMatchObject({ id: 9, error: { code: -32009, data: [{ reason: "VERSION_NOT_SUPPORTED", metadata: { supportedVersions: "1.0" } }] } });
      expect(server.fake.calls.length).toBe(before);
    }
    expect((await post(rpc("SendMessage", message("v")), {})).json!.error.message).toMatch(/names no A2A-Version.*0\.3/);
  });

  it("hands the requested extensions to the service and echoes the activated ones", async () => {
    const answer = await post(rpc("SendMessage", message("ext")), { ...V1, "A2A-Extensions": ` https://other.example/x, ${SUPPORTED_EXTENSION}` });
    expect(answer.headers.get("a2a-extensions")).toBe(SUPPORTED_EXTENSION);
    expect((await post(rpc("SendMessage", message("ext")))).headers.get("a2a-extensions")).toBeNull();
  });
});

describe("streams", () => {
  const stream = (method: string, params: unknown, headers: Record<string, string> = {}) =>
    fetch(endpoint, { method: "POST", headers: { ...V1, "Content-Type": "application/json", Accept: "text/event-stream", ...headers }, body: JSON.stringify(rpc(method, params, "s1")) });

  it("answers SendStreamingMessage as SSE, each data a JSON-RPC response with the request's id", async () => {
    const response = await stream("SendStreamingMessage", message("streamed"));
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = sseFrames(await response.text()).filter((frame) => frame.data !== "");
    expect(frames.map((frame) => frame.id)).toEqual(["1", "2", "3", "4"]);
    const results = frames.map((frame) => JSON.parse(frame.data) as Json);
    for (const result of results) expect(result).toMatchObject({ jsonrpc: "2.0", id: "s1" });
    expect(Object.keys(results[0]!.result)).toEqual(["task"]);
    expect(results[1]!.result).toMatchObject({ statusUpdate: { status: { state: "TASK_STATE_WORKING" } } });
    expect(results[2]!.result).toMatchObject({ artifactUpdate: { lastChunk: true } });
    expect(results[3]!.result).toMatchObject({ statusUpdate: { status: { state: "TASK_STATE_COMPLETED" } } });
  });

  it("answers a refusal before the first event as a plain JSON-RPC error", async () => {
    const task = (await post(rpc("SendMessage", message("done")))).json!.result.task;
    const response = await stream("SubscribeToTask", { id: task.id });
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(((await response.json()) as Json)).toMatchObject({ id: "s1", error: { code: -32004 } });
    expect(((await (await stream("SubscribeToTask", { id: "nope" })).json()) as Json).error.code).toBe(-32001);
  });

  it("ends a stream that fails with an error response in its last data", async () => {
    const frames = sseFrames(await (await stream("SendStreamingMessage", message("stream-fail"))).text()).filter((frame) => frame.data !== "");
    expect(JSON.parse(frames.at(-1)!.data)).toMatchObject({ jsonrpc: "2.0", id: "s1", error: { code: -32006, data: [{ reason: "INVALID_AGENT_RESPONSE" }] } });
  });

  it("passes Last-Event-ID to the service, which resumes after it", async () => {
    const task = (await post(rpc("SendMessage", message("resumable")))).json!.result.task;
    const frames = sseFrames(await (await stream("SubscribeToTask", { id: task.id }, { "Last-Event-ID": "2" })).text()).filter((frame) => frame.data !== "");
    expect(frames.map((frame) => frame.id)).toEqual(["3", "4"]);
    expect(server.fake.last("SubscribeToTask")!.headers.get("last-event-id")).toBe("2");
  });

  it("sends heartbeats on an idle stream and aborts the service's call when the client goes away", async () => {
    const response = await stream("SendStreamingMessage", message("slow"));
    const frames = await readFramesUntil(response, (seen) => seen.some((frame) => frame.comment === "heartbeat"));
    expect(frames.filter((frame) => frame.data !== "").map((frame) => frame.id)).toEqual(["1", "2", "3"]);
    const call = server.fake.last("SendStreamingMessage")!;
    await expect.poll(() => call.signal.aborted).toBe(true);
  });

  it("ends open streams with an Unavailable error when the server shuts down", async () => {
    const own = await startFakeA2AServer({ sseHeartbeatMs: 50 });
    const response = await fetch(`${own.url}/a2a/jsonrpc`, { method: "POST", headers: { ...V1, "Content-Type": "application/json" }, body: JSON.stringify(rpc("SendStreamingMessage", message("slow"), "d")) });
    const reading = response.text();
    await expect.poll(() => own.fake.calls.length).toBe(1);
    const closing = own.close();
    const frames = sseFrames(await reading).filter((frame) => frame.data !== "");
    await closing;
    expect(frames.map((frame) => frame.id)).toEqual(["1", "2", "3", undefined]);
    expect(JSON.parse(frames.at(-1)!.data)).toMatchObject({ id: "d", error: { code: -32000, data: [{ reason: "UNAVAILABLE" }] } });
    expect(JSON.parse(frames.at(-1)!.data).error.message).toMatch(/shutting down/);
  });

  it("does not run a streaming method sent as a notification", async () => {
    const before = server.fake.calls.length;
    expect((await post({ jsonrpc: "2.0", method: "SendStreamingMessage", params: message("n") })).status).toBe(204);
    expect(server.fake.calls.length).toBe(before);
  });
});

describe("HTTP/2", () => {
  it("serves unary calls and streams over h2c", async () => {
    const unary = await h2Request(server.url, "POST", "/a2a/jsonrpc", { ...V1, "content-type": "application/json" }, JSON.stringify(rpc("SendMessage", message("h2"))));
    expect(unary.status).toBe(200);
    expect(JSON.parse(unary.body)).toMatchObject({ result: { task: { artifacts: [{ parts: [{ text: "echo: h2" }] }] } } });
    const streamed = await h2Request(server.url, "POST", "/a2a/jsonrpc", { ...V1, "content-type": "application/json" }, JSON.stringify(rpc("SendStreamingMessage", message("h2s"))));
    expect(streamed.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(sseFrames(streamed.body).filter((frame) => frame.data !== "")).toHaveLength(4);
  });
});

describe("the @a2a-js/sdk JSON-RPC client", () => {
  it("sends, streams, gets, lists and cancels", async () => {
    const client = await new ClientFactory().createFromAgentCard({
      name: "fake",
      description: "fake",
      version: "1",
      supportedInterfaces: [{ url: endpoint, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" }],
      capabilities: { streaming: true, pushNotifications: false, extensions: [] },
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
      skills: [],
    } as never);
    const request = SendMessageRequest.fromJSON(message("sdk"));
    const sent = (await client.sendMessage(request)) as Json;
    expect(sent.id).toMatch(/^task-/);
    const got = (await client.getTask({ id: sent.id, tenant: "" } as never)) as Json;
    expect(got.artifacts[0].parts[0].content).toEqual({ $case: "text", value: "echo: sdk" });
    const kinds: string[] = [];
    for await (const event of client.sendMessageStream(SendMessageRequest.fromJSON(message("sdk-stream")))) kinds.push(String((event as Json).kind ?? Object.keys(event as Json).join("+")));
    expect(kinds).toHaveLength(4);
    const listed = (await client.listTasks({ tenant: "", contextId: "", pageToken: "", status: 0 } as never)) as Json;
    expect(listed.tasks.length).toBeGreaterThan(1);
    const canceled = (await client.cancelTask({ id: sent.id, tenant: "" } as never)) as Json;
    expect(canceled.status.state).toBe(5);
    await expect(client.getTask({ id: "missing", tenant: "" } as never)).rejects.toMatchObject({ name: "TaskNotFoundError" });
    expect(server.fake.last("GetTask")!.headers.get("a2a-version")).toBe("1.0");
  });
});

describeEngineFlows("JSONRPC", "/a2a/jsonrpc");

describe("curl-shaped calls on the engine (docs/A2A.md)", () => {
  it("sends and gets with plain JSON-RPC requests, and names the version a request without one lacks", async () => {
    const { server: engine, authorization } = await startEngineServer();
    try {
      const call = async (body: unknown, version: Record<string, string> = V1) =>
        (await (await fetch(`${engine.url}/a2a/jsonrpc`, { method: "POST", headers: { Authorization: await authorization(), "Content-Type": "application/json", ...version }, body: JSON.stringify(body) })).json()) as Json;
      const sent = await call({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "Curl works." }] } } });
      expect(sent.result.task.status.state).toBe("TASK_STATE_COMPLETED");
      const got = await call({ jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: sent.result.task.id, historyLength: 5 } });
      expect(got.result.id).toBe(sent.result.task.id);
      const unversioned = await call({ jsonrpc: "2.0", id: 3, method: "GetTask", params: { id: sent.result.task.id } }, {});
      expect(unversioned.error.code).toBe(-32009);
    } finally {
      await engine.close();
    }
  });
});
