// A2A's HTTP+JSON/REST binding (/a2a/rest) through real sockets, onto a fake
// A2AService: every route with and without a tenant, path and query
// parameters, bodies, google.rpc.Status errors with the spec's HTTP
// statuses, 404/405/415/413, versions, SSE streams, HTTP/2, and the official
// @a2a-js/sdk REST client.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClientFactory } from "@a2a-js/sdk/client";
import { SendMessageRequest } from "@a2a-js/sdk";
import { h2Request, sseFrames, startFakeA2AServer, V1, type FakeA2AServer } from "./helpers/a2a-http.js";
import { SUPPORTED_EXTENSION } from "./helpers/a2a-fake.js";
import { describeEngineFlows, startEngineServer } from "./helpers/a2a-engine.js";

let server: FakeA2AServer;
let base: string;
beforeAll(async () => {
  server = await startFakeA2AServer({ maxFileSize: 4096 });
  base = `${server.url}/a2a/rest`;
});
afterAll(() => server.close());

type Json = Record<string, any>;

const message = (text: string) => ({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] } });

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; json: Json; text: string }> {
  const init: RequestInit = { method, headers: { ...V1, ...(body === undefined ? {} : { "Content-Type": "application/a2a+json" }), ...headers } };
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const response = await fetch(`${base}${path}`, init);
  const text = await response.text();
  let json: Json = {};
  try {
    json = JSON.parse(text) as Json;
  } catch {
    // not JSON: an SSE body, say
  }
  return { status: response.status, headers: response.headers, json, text };
}

const send = async (text: string, prefix = "") => (await call("POST", `${prefix}/message:send`, message(text))).json.task as Json;

describe("routes", () => {
  it("POST /message:send answers the SendMessageResponse as application/a2a+json", async () => {
    const answer = await call("POST", "/message:send", message("hello"));
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/a2a+json");
    expect(answer.json).toMatchObject({ task: { status: { state: "TASK_STATE_COMPLETED" }, artifacts: [{ parts: [{ text: "echo: hello" }] }] } });
    expect(server.fake.last("SendMessage")!.protocol).toBe("http+json");
    const plain = await call("POST", "/message:send", message("json"), { "Content-Type": "application/json", Accept: "application/json" });
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toBe("application/json");
    const both = await call("GET", "/tasks/missing", undefined, { Accept: "application/a2a+json, application/json" });
    expect(both.headers.get("content-type")).toBe("application/a2a+json");
  });

  it("puts a leading /{tenant} segment into the request's tenant field, on every route", async () => {
    const task = await send("tenanted", "/acme");
    expect(server.fake.last("SendMessage")!.request).toMatchObject({ tenant: "acme" });
    await call("GET", `/acme/tasks/${task.id}`);
    expect(server.fake.last("GetTask")!.request).toMatchObject({ tenant: "acme", id: task.id });
    await call("GET", "/team%20b/tasks");
    expect(server.fake.last("ListTasks")!.request).toMatchObject({ tenant: "team b" });
    await call("GET", `/tasks/tasks`);
    expect(server.fake.last("GetTask")!.request).toMatchObject({ tenant: "", id: "tasks" });
    await call("GET", "/acme/extendedAgentCard");
    expect(server.fake.last("GetExtendedAgentCard")!.request).toMatchObject({ tenant: "acme" });
  });

  it("GET /tasks/{id} reads historyLength from the query and decodes the id", async () => {
    const task = await send("get me");
    const answer = await call("GET", `/tasks/${encodeURIComponent(task.id)}?historyLength=0`);
    expect(answer.json).toMatchObject({ id: task.id, contextId: task.contextId });
    expect(server.fake.last("GetTask")!.request).toMatchObject({ id: task.id, historyLength: 0 });
    await call("GET", "/tasks/a%2Fb%3Acancel");
    expect(server.fake.last("GetTask")!.request).toMatchObject({ id: "a/b:cancel" });
  });

  it("GET /tasks reads camelCase query parameters: enums by name, numbers, booleans, timestamps", async () => {
    await call("GET", "/tasks?contextId=c-1&status=TASK_STATE_WORKING&pageSize=5&pageToken=p&historyLength=2&statusTimestampAfter=2025-11-09T10:30:00Z&includeArtifacts=true&A2A-Version=1.0");
    const request = server.fake.last("ListTasks")!.request as Json;
    expect(request).toMatchObject({ contextId: "c-1", status: 2, pageSize: 5, pageToken: "p", historyLength: 2, includeArtifacts: true });
    expect(request.statusTimestampAfter.seconds).toBe(BigInt(Date.parse("2025-11-09T10:30:00Z") / 1000));
    await call("GET", "/tasks?status=3&includeArtifacts=false");
    expect(server.fake.last("ListTasks")!.request).toMatchObject({ status: 3, includeArtifacts: false });
  });

  it("refuses query values that are not what the field holds", async () => {
    for (const query of ["pageSize=abc", "includeArtifacts=yes", "status=working", "statusTimestampAfter=yesterday", "historyLength=1.5"]) {
      const answer = await call("GET", `/tasks?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.json.error, query).toMatchObject({ code: 400, status: "INVALID_ARGUMENT", details: [{ reason: "INVALID_PARAMS", domain: "a2a-protocol.org" }] });
    }
  });

  it("POST /tasks/{id}:cancel takes an empty body; a second cancel is TaskNotCancelable", async () => {
    const task = await send("cancel me");
    const canceled = await fetch(`${base}/tasks/${task.id}:cancel`, { method: "POST", headers: V1 });
    expect(canceled.status).toBe(200);
    expect(((await canceled.json()) as Json).status.state).toBe("TASK_STATE_CANCELED");
    const again = await call("POST", `/tasks/${task.id}:cancel`, { metadata: { why: "twice" } });
    expect(again.status).toBe(400);
    expect(again.json.error).toMatchObject({ code: 400, status: "FAILED_PRECONDITION", details: [{ reason: "TASK_NOT_CANCELABLE" }] });
    expect(server.fake.last("CancelTask")!.request).toMatchObject({ id: task.id, metadata: { why: "twice" } });
  });

  it("serves the push notification config routes with their path parameters", async () => {
    const task = await send("pushed");
    const created = await call("POST", `/tasks/${task.id}/pushNotificationConfigs`, { url: "https://example.org/hook", token: "t" });
    expect(created.json).toMatchObject({ taskId: task.id, id: "cfg-1", url: "https://example.org/hook" });
    expect((await call("GET", `/tasks/${task.id}/pushNotificationConfigs/cfg-1`)).json).toMatchObject({ id: "cfg-1" });
    expect((await call("GET", `/tasks/${task.id}/pushNotificationConfigs?pageSize=10`)).json.configs).toHaveLength(1);
    expect(server.fake.last("ListTaskPushNotificationConfigs")!.request).toMatchObject({ taskId: task.id, pageSize: 10 });
    const deleted = await call("DELETE", `/tasks/${task.id}/pushNotificationConfigs/cfg-1`);
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({});
    expect((await call("GET", `/tasks/${task.id}/pushNotificationConfigs/cfg-1`)).status).toBe(404);
  });

  it("answers 404 for unknown paths and 405 (with Allow) for a known path with another verb", async () => {
    const unknown = await call("GET", "/nowhere/at/all");
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toMatchObject({ code: 404, status: "NOT_FOUND" });
    expect((await call("GET", "")).status).toBe(404);
    const wrong = await call("GET", "/message:send");
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("POST");
    const tasks = await call("DELETE", "/tasks/x");
    expect(tasks.status).toBe(405);
    expect(tasks.headers.get("allow")).toBe("GET");
    expect((await call("PUT", "/tasks/x/pushNotificationConfigs")).headers.get("allow")).toBe("POST, GET");
  });
});

describe("bodies and limits", () => {
  it("refuses malformed JSON, a body that is not an object, and request messages that do not parse", async () => {
    const broken = await call("POST", "/message:send", "{ not json");
    expect(broken.status).toBe(400);
    expect(broken.json.error).toMatchObject({ status: "INVALID_ARGUMENT", details: [{ reason: "PARSE_ERROR" }] });
    expect((await call("POST", "/message:send", "[1, 2]")).json.error.details[0].reason).toBe("INVALID_PARAMS");
    const badRole = await call("POST", "/message:send", { message: { messageId: "m", role: "user", parts: [] } });
    expect(badRole.status).toBe(400);
    expect(badRole.json.error.message).toMatch(/SendMessageRequest is not valid/);
  });

  it("ignores unknown fields in a body", async () => {
    const answer = await call("POST", "/message:send", { ...message("extra"), somethingNew: { deep: true } });
    expect(answer.status).toBe(200);
  });

  it("refuses another content type (415) and an oversize body (413), then serves the next request", async () => {
    const text = await call("POST", "/message:send", JSON.stringify(message("x")), { "Content-Type": "text/plain" });
    expect(text.status).toBe(415);
    expect(text.json.error).toMatchObject({ code: 415, status: "INVALID_ARGUMENT", details: [{ reason: "CONTENT_TYPE_NOT_SUPPORTED" }] });
    const big = await call("POST", "/message:send", message("y".repeat(80 * 1024)));
    expect(big.status).toBe(413);
    expect(big.json.error).toMatchObject({ code: 413, status: "RESOURCE_EXHAUSTED" });
    expect((await call("POST", "/message:send", message("after"))).status).toBe(200);
  });
});

describe("errors", () => {
  const STATUSES: Array<[string, number, string, string]> = [
    ["TaskNotFound", 404, "NOT_FOUND", "TASK_NOT_FOUND"],
    ["TaskNotCancelable", 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"],
    ["PushNotificationNotSupported", 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED"],
    ["UnsupportedOperation", 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"],
    ["ContentTypeNotSupported", 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED"],
    ["InvalidAgentResponse", 500, "INTERNAL", "INVALID_AGENT_RESPONSE"],
    ["ExtendedAgentCardNotConfigured", 400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED"],
    ["ExtensionSupportRequired", 400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED"],
    ["VersionNotSupported", 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED"],
  ];
  it.each(STATUSES)("answers %s as HTTP %i, google.rpc.Status %s with its ErrorInfo", async (kind, http, status, reason) => {
    const answer = await call("POST", "/message:send", message(`fail:${kind}`));
    expect(answer.status).toBe(http);
    expect(answer.json).toEqual({
      error: { code: http, status, message: `asked to fail with ${kind}`, details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "a2a-protocol.org", metadata: { asked: "yes" } }] },
    });
  });

  it("hides unexpected failures as 500 INTERNAL, and challenges a caller without credentials", async () => {
    const boom = await call("POST", "/message:send", message("boom"));
    expect(boom.status).toBe(500);
    expect(boom.json.error).toMatchObject({ code: 500, status: "INTERNAL", message: "internal error" });
    expect(boom.text).not.toMatch(/secret/);
    const denied = await call("POST", "/message:send", message("unauthenticated"));
    expect(denied.status).toBe(401);
    expect(denied.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(denied.json.error).toMatchObject({ code: 401, status: "UNAUTHENTICATED" });
  });

  it("answers TaskNotFound for an unknown task", async () => {
    const answer = await call("GET", "/tasks/missing");
    expect(answer.status).toBe(404);
    expect(answer.json.error).toMatchObject({ status: "NOT_FOUND", details: [{ reason: "TASK_NOT_FOUND", metadata: { taskId: "missing" } }] });
  });
});

describe("versions and extensions", () => {
  it("refuses a request without a version, or with one we do not speak, before the service sees it", async () => {
    for (const headers of [{ "A2A-Version": "" }, { "A2A-Version": "0.3" }, { "A2A-Version": "99.0" }]) {
      const before = server.fake.calls.length;
      const answer = await fetch(`${base}/message:send`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(message("v")) });
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as Json).error).toMatchObject({ status: "FAILED_PRECONDITION", details: [{ reason: "VERSION_NOT_SUPPORTED" }] });
      expect(server.fake.calls.length).toBe(before);
    }
    const query = await fetch(`${base}/tasks?A2A-Version=1.0`);
    expect(query.status).toBe(200);
  });

  it("echoes the activated extensions", async () => {
    const answer = await call("GET", "/extendedAgentCard", undefined, { "A2A-Extensions": `${SUPPORTED_EXTENSION},https://unknown.example/e` });
    expect(answer.headers.get("a2a-extensions")).toBe(SUPPORTED_EXTENSION);
  });
});

describe("streams", () => {
  it("POST /message:stream answers SSE whose every data is a bare StreamResponse", async () => {
    const answer = await call("POST", "/message:stream", message("streamed"), { Accept: "text/event-stream" });
    expect(answer.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = sseFrames(answer.text).filter((frame) => frame.data !== "");
    expect(frames.map((frame) => frame.id)).toEqual(["1", "2", "3", "4"]);
    const events = frames.map((frame) => JSON.parse(frame.data) as Json);
    expect(events.map((event) => Object.keys(event)[0])).toEqual(["task", "statusUpdate", "artifactUpdate", "statusUpdate"]);
  });

  it("subscribes by POST and by GET, resuming after Last-Event-ID", async () => {
    const task = await send("resume");
    for (const method of ["POST", "GET"]) {
      const answer = await call(method, `/tasks/${task.id}:subscribe`, undefined, { "Last-Event-ID": "1" });
      expect(sseFrames(answer.text).filter((frame) => frame.data !== "").map((frame) => frame.id), method).toEqual(["2", "3", "4"]);
    }
  });

  it("answers a refusal before the first event as a Status, and a failure after it as an error event", async () => {
    const task = await send("ended");
    const refused = await call("POST", `/tasks/${task.id}:subscribe`);
    expect(refused.status).toBe(400);
    expect(refused.json.error.details[0].reason).toBe("UNSUPPORTED_OPERATION");
    const failed = await call("POST", "/message:stream", message("stream-fail"));
    const last = sseFrames(failed.text).at(-1)!;
    expect(last.event).toBe("error");
    expect(JSON.parse(last.data)).toMatchObject({ error: { code: 500, status: "INTERNAL", details: [{ reason: "INVALID_AGENT_RESPONSE" }] } });
  });
});

describe("HTTP/2", () => {
  it("serves requests and streams over h2c", async () => {
    const unary = await h2Request(server.url, "POST", "/a2a/rest/message:send", { ...V1, "content-type": "application/a2a+json" }, JSON.stringify(message("h2")));
    expect(unary.status).toBe(200);
    expect(JSON.parse(unary.body)).toMatchObject({ task: { artifacts: [{ parts: [{ text: "echo: h2" }] }] } });
    const missing = await h2Request(server.url, "GET", "/a2a/rest/tasks/nope", { ...V1, accept: "application/json" });
    expect(missing.status).toBe(404);
    expect(missing.headers["content-type"]).toBe("application/json");
    const streamed = await h2Request(server.url, "POST", "/a2a/rest/message:stream", { ...V1, "content-type": "application/a2a+json" }, JSON.stringify(message("h2s")));
    expect(sseFrames(streamed.body).filter((frame) => frame.data !== "")).toHaveLength(4);
  });
});

describe("the @a2a-js/sdk REST client", () => {
  it("sends, streams, gets, lists, cancels and resubscribes", async () => {
    const client = await new ClientFactory().createFromAgentCard({
      name: "fake",
      description: "fake",
      version: "1",
      supportedInterfaces: [{ url: base, protocolBinding: "HTTP+JSON", protocolVersion: "1.0", tenant: "" }],
      capabilities: { streaming: true, pushNotifications: false, extensions: [] },
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
      skills: [],
    } as never);
    const sent = (await client.sendMessage(SendMessageRequest.fromJSON(message("sdk")))) as Json;
    expect(sent.id).toMatch(/^task-/);
    expect(((await client.getTask({ id: sent.id, tenant: "", historyLength: 1 } as never)) as Json).id).toBe(sent.id);
    expect(server.fake.last("GetTask")!.request).toMatchObject({ historyLength: 1 });
    let streamed = 0;
    for await (const _ of client.sendMessageStream(SendMessageRequest.fromJSON(message("sdk-stream")))) streamed++;
    expect(streamed).toBe(4);
    const listed = (await client.listTasks({ tenant: "", contextId: "", pageToken: "", status: 2, pageSize: 3 } as never)) as Json;
    expect(listed.tasks).toBeDefined();
    expect(server.fake.last("ListTasks")!.request).toMatchObject({ status: 2, pageSize: 3 });
    expect(((await client.cancelTask({ id: sent.id, tenant: "" } as never)) as Json).status.state).toBe(5);
    await expect(client.getTask({ id: "missing", tenant: "" } as never)).rejects.toMatchObject({ name: "TaskNotFoundError" });
    const slow = await send("slow");
    const controller = new AbortController();
    let seen = 0;
    for await (const _ of client.resubscribeTask({ id: slow.id, tenant: "" } as never, { signal: controller.signal })) {
      if (++seen === 3) break;
    }
    expect(seen).toBe(3);
  });
});

describeEngineFlows("HTTP+JSON", "/a2a/rest");

describe("curl-shaped calls on the engine (docs/A2A.md)", () => {
  it("sends, gets, lists and cancels with plain REST requests", async () => {
    const { server: engine, authorization } = await startEngineServer();
    try {
      const call = async (method: string, path: string, body?: unknown) => {
        const response = await fetch(`${engine.url}/a2a/rest${path}`, {
          method,
          headers: { Authorization: await authorization(), ...V1, ...(body === undefined ? {} : { "Content-Type": "application/a2a+json" }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: response.status, json: (await response.json()) as Json };
      };
      const sent = await call("POST", "/message:send", { message: { messageId: "m-2", role: "ROLE_USER", parts: [{ text: "Curl works." }] } });
      expect(sent.json.task.status.state).toBe("TASK_STATE_COMPLETED");
      const id = sent.json.task.id as string;
      expect((await call("GET", `/tasks/${id}?historyLength=5`)).json.id).toBe(id);
      expect((await call("GET", "/tasks?status=TASK_STATE_COMPLETED&pageSize=10&includeArtifacts=true")).json.tasks.map((task: Json) => task.id)).toContain(id);
      const cancel = await call("POST", `/tasks/${id}:cancel`);
      expect(cancel.status).toBe(400);
      expect(cancel.json.error.details[0].reason).toBe("TASK_NOT_CANCELABLE");
    } finally {
      await engine.close();
    }
  });
});

describe("query parameters of other field kinds", () => {
  it("reads a repeated field repeated or comma-separated, and refuses an object", async () => {
    const { queryJson } = await import("../src/a2a/rest-routes.js");
    const { MessageSchema } = await import("../gen/lf/a2a/v1/a2a_pb.js");
    expect(queryJson(MessageSchema, new URLSearchParams("extensions=urn:a,urn:b&extensions=urn:c&referenceTaskIds=t1&unknown=1"))).toEqual({ extensions: ["urn:a", "urn:b", "urn:c"], referenceTaskIds: ["t1"] });
    expect(() => queryJson(MessageSchema, new URLSearchParams("metadata=x"))).toThrow(/cannot be given in the query/);
  });
});
