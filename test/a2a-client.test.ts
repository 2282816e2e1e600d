// Our A2A client against agents built on the official A2A SDK
// (@a2a-js/sdk), over real sockets, on each binding the card lists (gRPC,
// JSON-RPC, HTTP+JSON): send (blocking and returnImmediately), stream,
// input-required answered, cancel, getTask, listTasks, subscribe, a dropped
// stream resumed, typed errors; and the card: signed (verified), unsigned
// (accepted, reported), tampered (refused).
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TaskState, type StreamResponse, type Task } from "../gen/lf/a2a/v1/a2a_pb.js";
import { TaskState as SynapseState } from "../gen/synapse/v1/payloads_pb.js";
import { A2AClient, A2AClientError, canonicalJson, cardUrlsFor, dataPart, readAgentCard, stateOf, taskView } from "../src/api/client.js";
import { createIdentity, PinnedKeys, verifyToken } from "../src/api/index.js";
import { askingExecutor, completingExecutor, startSdkAgent, streamingExecutor, type SdkAgent } from "./helpers/a2a-sdk-agent.js";

const BINDINGS = ["GRPC", "JSONRPC", "HTTP+JSON"] as const;

let completing: SdkAgent;
let asking: SdkAgent;
let streaming: SdkAgent;

beforeAll(async () => {
  [completing, asking, streaming] = await Promise.all([startSdkAgent(completingExecutor), startSdkAgent(askingExecutor), startSdkAgent(streamingExecutor())]);
});

afterAll(async () => {
  await Promise.all([completing?.close(), asking?.close(), streaming?.close()]);
});

function artifactData(task: Task | undefined, index = 0): JsonValue | undefined {
  const part = task?.artifacts[index]?.parts[0];
  return part?.content.case === "data" ? toJson(ValueSchema, part.content.value) : undefined;
}

async function collect(events: AsyncIterable<StreamResponse>, onEvent?: (event: StreamResponse, index: number) => void): Promise<StreamResponse[]> {
  const seen: StreamResponse[] = [];
  for await (const event of events) {
    onEvent?.(event, seen.length);
    seen.push(event);
  }
  return seen;
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(BINDINGS)("our client against an @a2a-js/sdk agent over %s", (binding) => {
  const connect = (agent: SdkAgent, token = "test-token") => A2AClient.connect({ url: agent.url, bindings: [binding], auth: { token } });

  it("sends a message and waits for the completed task, with the A2A-Version header and the bearer token", async () => {
    const client = await connect(completing, `token-${binding}`);
    expect(client.binding).toBe(binding);
    const before = completing.requests.length;
    const { task } = await client.sendMessage({ parts: [dataPart({ city: "Oslo" })] });
    expect(task?.status?.state).toBe(TaskState.COMPLETED);
    expect(artifactData(task)).toEqual({ echo: { city: "Oslo" } });
    const seen = completing.requests.slice(before);
    expect(seen.length).toBeGreaterThan(0);
    for (const request of seen) {
      expect(request.version).toBe("1.0");
      expect(request.authorization).toBe(`Bearer token-${binding}`);
    }
    // The same task read back, and the Synapse view of it.
    const read = await client.getTask(task!.id);
    expect(read.status?.state).toBe(TaskState.COMPLETED);
    const view = taskView(read);
    expect(view.state).toBe(SynapseState.COMPLETED);
    expect(toJson(ValueSchema, view.result!.output!)).toEqual({ echo: { city: "Oslo" } });
  });

  it("returns at once with returnImmediately, and the task completes later", async () => {
    const client = await connect(streaming);
    const { task } = await client.sendMessage({ parts: [dataPart({ count: 2, delayMs: 100 })] }, { returnImmediately: true });
    expect(task).toBeDefined();
    expect([TaskState.SUBMITTED, TaskState.WORKING]).toContain(task!.status?.state);
    const later = await until(() => client.getTask(task!.id), (t) => t.status?.state === TaskState.COMPLETED);
    expect(later.status?.state).toBe(TaskState.COMPLETED);
    expect(later.artifacts.map((a) => a.artifactId)).toEqual(["chunk-1", "chunk-2"]);
  });

  it("streams the task, its status and each artifact until it completes", async () => {
    const client = await connect(streaming);
    const events = await collect(client.sendStreamingMessage({ parts: [dataPart({ count: 3, delayMs: 50 })] }));
    expect(events[0]?.payload.case).toBe("task");
    const artifacts = events.filter((e) => e.payload.case === "artifactUpdate").map((e) => (e.payload.value as { artifact?: { artifactId: string } }).artifact?.artifactId);
    expect(artifacts).toEqual(["chunk-1", "chunk-2", "chunk-3"]);
    expect(stateOf(events.at(-1)!)).toBe(TaskState.COMPLETED);
  });

  it("answers input-required with a follow-up message on the task", async () => {
    const client = await connect(asking);
    const { task } = await client.sendMessage({ parts: ["what's the weather?"] });
    expect(task?.status?.state).toBe(TaskState.INPUT_REQUIRED);
    const view = taskView(task!);
    expect(view.state).toBe(SynapseState.INFO_NEEDED);
    expect(view.pendingInfo?.question).toBe("which city?");
    expect(view.pendingInfo?.missingFields.map((f) => f.field)).toEqual(["city"]);
    const answered = await client.reply(task!, [dataPart({ city: "Bergen" })]);
    expect(answered.task?.id).toBe(task!.id);
    expect(answered.task?.status?.state).toBe(TaskState.COMPLETED);
    expect(artifactData(answered.task)).toEqual({ answer: { city: "Bergen" }, forecast: "sunny" });
  });

  it("stops streaming at input-required, and the answer streams to completion", async () => {
    const client = await connect(asking);
    const first = await collect(client.sendStreamingMessage({ parts: ["weather"] }));
    expect(stateOf(first.at(-1)!)).toBe(TaskState.INPUT_REQUIRED);
    const task = first[0]!.payload.value as Task;
    const second = await collect(client.sendStreamingMessage({ parts: [dataPart({ city: "Tromsø" })], taskId: task.id, contextId: task.contextId }));
    expect(stateOf(second.at(-1)!)).toBe(TaskState.COMPLETED);
  });

  it("cancels a running task; cancelling a completed one is TaskNotCancelable", async () => {
    const client = await connect(streaming);
    const { task } = await client.sendMessage({ parts: [dataPart({ count: 50, delayMs: 100 })] }, { returnImmediately: true });
    const cancelled = await client.cancelTask(task!.id);
    expect(cancelled.status?.state).toBe(TaskState.CANCELED);
    expect(taskView(cancelled).state).toBe(SynapseState.CANCELLED);
    expect((await client.getTask(task!.id)).status?.state).toBe(TaskState.CANCELED);
    const done = (await (await connect(completing)).sendMessage({ parts: ["done"] })).task!;
    const refused = await (await connect(completing)).cancelTask(done.id).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(A2AClientError);
    expect((refused as A2AClientError).kind).toBe("TaskNotCancelable");
  });

  it("reports an unknown task as TaskNotFound", async () => {
    const client = await connect(completing);
    const error = await client.getTask("no-such-task").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(A2AClientError);
    expect((error as A2AClientError).kind).toBe("TaskNotFound");
    expect((error as A2AClientError).detail.binding).toBe(binding);
  });

  it("lists tasks, filtered by context", async () => {
    const client = await connect(completing);
    const { task } = await client.sendMessage({ parts: ["list me"], contextId: `ctx-${binding}` });
    const page = await client.listTasks({ contextId: `ctx-${binding}` });
    expect(page.tasks.map((t) => t.id)).toEqual([task!.id]);
    const all = await client.listTasks({ pageSize: 100 });
    expect(all.tasks.map((t) => t.id)).toContain(task!.id);
  });

  it("subscribes to a running task: the task first, then its updates to the end", async () => {
    const client = await connect(streaming);
    const { task } = await client.sendMessage({ parts: [dataPart({ count: 3, delayMs: 120 })] }, { returnImmediately: true });
    const events = await collect(client.subscribeToTask(task!.id));
    expect(events[0]?.payload.case).toBe("task");
    expect(stateOf(events.at(-1)!)).toBe(TaskState.COMPLETED);
  });

  it("resumes a dropped stream by resubscribing to the task", async () => {
    const client = await A2AClient.connect({ url: streaming.url, bindings: [binding], resubscribeDelayMs: 50 });
    let dropped = false;
    const events = await collect(client.sendStreamingMessage({ parts: [dataPart({ count: 5, delayMs: 150 })] }), (event) => {
      if (!dropped && event.payload.case === "artifactUpdate") {
        dropped = true;
        streaming.dropConnections();
      }
    });
    expect(dropped).toBe(true);
    // After the drop the stream goes on from a resubscription, which starts with the task as it then is.
    expect(events.filter((e) => e.payload.case === "task").length).toBeGreaterThanOrEqual(2);
    expect(stateOf(events.at(-1)!)).toBe(TaskState.COMPLETED);
    const final = await client.getTask((events[0]!.payload.value as Task).id);
    expect(final.artifacts.map((a) => a.artifactId)).toEqual(["chunk-1", "chunk-2", "chunk-3", "chunk-4", "chunk-5"]);
  });
});

describe("our EdDSA bearer tokens", () => {
  it("sends a token made from the caller's key, for the audience given, that verifies", async () => {
    const identity = createIdentity();
    const client = await A2AClient.connect({ url: completing.url, bindings: ["JSONRPC"], auth: { identity, audience: "the-agent-called" } });
    const before = completing.requests.length;
    await client.sendMessage({ parts: ["hi"] });
    const header = completing.requests.slice(before)[0]?.authorization ?? "";
    expect(header).toMatch(/^Bearer ey/);
    const caller = await verifyToken(header.slice("Bearer ".length), { audience: "the-agent-called", trust: PinnedKeys.inMemory({ firstUse: "any" }) });
    expect(caller.agentId).toBe(identity.agentId);
    await expect(verifyToken(header.slice("Bearer ".length), { audience: "another-agent", trust: PinnedKeys.inMemory({ firstUse: "any" }) })).rejects.toThrow();
  });

  it("refuses to make tokens without knowing whom they are for", async () => {
    const error = await A2AClient.connect({ url: completing.url, auth: { identity: createIdentity() } }).catch((e: unknown) => e);
    expect((error as A2AClientError).kind).toBe("Unauthenticated");
  });
});

describe("choosing the binding", () => {
  it("prefers gRPC, then JSON-RPC, then HTTP+JSON, whatever the card's order; the caller's order wins", async () => {
    expect((await A2AClient.connect({ url: completing.url })).binding).toBe("GRPC");
    expect((await A2AClient.connect({ url: completing.cardUrl, bindings: ["HTTP+JSON", "JSONRPC"] })).binding).toBe("HTTP+JSON");
  });

  it("refuses a card that offers none of the bindings asked for", async () => {
    const only = await startSdkAgent(completingExecutor, { order: ["JSONRPC"] });
    try {
      const error = await A2AClient.connect({ url: only.url, bindings: ["GRPC"] }).catch((e: unknown) => e);
      expect((error as A2AClientError).kind).toBe("NoSupportedInterface");
    } finally {
      await only.close();
    }
  });
});

describe("the agent card's signature", () => {
  let signed: SdkAgent;
  let tampered: SdkAgent;
  beforeAll(async () => {
    [signed, tampered] = await Promise.all([startSdkAgent(completingExecutor, { signed: true }), startSdkAgent(completingExecutor, { signed: true, tamper: true })]);
  });
  afterAll(async () => {
    await Promise.all([signed?.close(), tampered?.close()]);
  });

  it("verifies a signed card with the key its same-origin jku names, and calls the agent", async () => {
    const client = await A2AClient.connect({ url: signed.url });
    expect(client.cardSignature).toEqual({ status: "verified", kid: "card-key", keySource: "jku" });
    expect((await client.sendMessage({ parts: ["hi"] })).task?.status?.state).toBe(TaskState.COMPLETED);
  });

  it("verifies a signed card with a key the caller trusts", async () => {
    const card = await readAgentCard(signed.url, { cardKeys: ({ kid }) => (kid === "card-key" ? signed.publicJwk : undefined) });
    expect(card.signature).toEqual({ status: "verified", kid: "card-key", keySource: "resolver" });
  });

  it("refuses a card changed after it was signed", async () => {
    const error = await A2AClient.connect({ url: tampered.url }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(A2AClientError);
    expect((error as A2AClientError).kind).toBe("CardSignatureInvalid");
  });

  it("refuses a signed card checked against another key", async () => {
    const other = await startSdkAgent(completingExecutor, { signed: true });
    try {
      const error = await readAgentCard(signed.url, { cardKeys: () => other.publicJwk }).catch((e: unknown) => e);
      expect((error as A2AClientError).kind).toBe("CardSignatureInvalid");
    } finally {
      await other.close();
    }
  });

  it("accepts an unsigned card and says so; requireSignedCard refuses it", async () => {
    const client = await A2AClient.connect({ url: completing.url });
    expect(client.cardSignature).toEqual({ status: "unsigned" });
    const error = await A2AClient.connect({ url: completing.url, requireSignedCard: true }).catch((e: unknown) => e);
    expect((error as A2AClientError).kind).toBe("CardUnverified");
  });

  it("looks for the card under the URL's path, then at its origin, or at the card URL given", async () => {
    expect(cardUrlsFor("https://a.example/agents/x/")).toEqual(["https://a.example/agents/x/.well-known/agent-card.json", "https://a.example/.well-known/agent-card.json"]);
    expect(cardUrlsFor("https://a.example")).toEqual(["https://a.example/.well-known/agent-card.json"]);
    expect(cardUrlsFor("https://a.example/cards/x.json")).toEqual(["https://a.example/cards/x.json"]);
    const underPath = await readAgentCard(`${completing.url}/a2a/`);
    expect(underPath.cardUrl).toBe(completing.cardUrl);
    expect(underPath.card.name).toBe("sdk test agent");
  });

  it("reports an unreachable card as CardInvalid", async () => {
    const error = await A2AClient.connect({ url: "http://127.0.0.1:1/" }).catch((e: unknown) => e);
    expect((error as A2AClientError).kind).toBe("CardInvalid");
  });
});

describe("JCS (RFC 8785)", () => {
  it("orders keys by UTF-16 code units and writes numbers and strings as ECMAScript does", () => {
    expect(canonicalJson({ b: [1, 1e21, 0.1, -0], a: "é\u0007\"", "\u20ac": 1, "\ud83d\ude00": 2, "\u0080": 3 })).toBe('{"a":"é\\u0007\\"","b":[1,1e+21,0.1,0],"\u0080":3,"\u20ac":1,"\ud83d\ude00":2}');
  });
});
