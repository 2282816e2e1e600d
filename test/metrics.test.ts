// GET /metrics through real sockets: scraped before and after a scripted
// workload (tasks over Connect and gRPC, a need-info round answered while a
// Watch is open, callbacks pushed to the requester's agent, tampered
// envelopes in every protocol), each family grows by what the workload did.
import { Code } from "@connectrpc/connect";
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { SynapseClient, type ClientWatchItem } from "../src/client/requester.js";
import { wireName } from "../src/protocol/message-types.js";
import { stateName } from "../src/protocol/state-machine.js";
import { buckets, delta, scrape, total, type Scrape } from "./helpers/metrics.js";
import { clientFor, PROTOCOLS, refusal } from "./helpers/protocols.js";
import { taskRequest } from "./helpers/requests.js";
import { connectClient, startTestServer } from "./helpers/server.js";

const TEXT = "Metrics count work. Every call is counted once. Histograms keep latency. Nothing else is needed.";
const SEND = "synapse.v1.P2PService/Send";

/** Waits (polling) until `check` holds; fails with `what` if it never does. */
async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`never happened: ${what}`);
}

/** Every event of a task with the state after it, read through Watch. */
async function eventsOf(client: SynapseClient, taskId: string): Promise<Array<{ type: MessageType; state: TaskState }>> {
  const events = [];
  for await (const item of client.watch(taskId)) if (item.kind === "event") events.push({ type: item.event.type, state: item.state });
  return events;
}

/** The transitions ("from to") and message types an event log shows. */
function tally(logs: Array<Array<{ type: MessageType; state: TaskState }>>): { transitions: Map<string, number>; types: Map<MessageType, number> } {
  const transitions = new Map<string, number>();
  const types = new Map<MessageType, number>();
  for (const log of logs) {
    let state = TaskState.PENDING;
    for (const event of log) {
      types.set(event.type, (types.get(event.type) ?? 0) + 1);
      if (event.state !== state) {
        const key = `${stateName(state)} ${stateName(event.state)}`;
        transitions.set(key, (transitions.get(key) ?? 0) + 1);
        state = event.state;
      }
    }
  }
  return { transitions, types };
}

/** Checks one label set of a histogram: its count grew by `count`, its buckets are cumulative and end in the count. */
function expectHistogram(before: Scrape, after: Scrape, name: string, labels: Record<string, string>, count: number): void {
  expect(delta(before, after, `${name}_count`, labels), `${name} count ${JSON.stringify(labels)}`).toBe(count);
  expect(delta(before, after, `${name}_sum`, labels)).toBeGreaterThan(0);
  const cumulative = buckets(after, name, labels);
  expect(cumulative.length).toBeGreaterThan(2);
  expect(cumulative.at(-1)).toEqual({ le: "+Inf", value: after.samples.get(`${name}_count{${Object.entries(labels).sort().map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(",")}}`) });
  for (let i = 1; i < cumulative.length; i++) expect(cumulative[i]!.value).toBeGreaterThanOrEqual(cumulative[i - 1]!.value);
}

describe("GET /metrics", () => {
  it("counts a workload's calls, messages, refusals, transitions, tasks, watches, callbacks and store writes", async () => {
    const executor = await startTestServer({ agentId: "executor_metrics" });
    const requester = await startTestServer();
    try {
      const viaConnect = await SynapseClient.connect({ baseUrl: executor.url, identity: requester.agent.identity, callback: { url: requester.url, inbox: requester.agent.inbox } });
      const viaGrpc = await connectClient(executor, { transport: { protocol: "grpc" } });
      const before = await scrape(executor.url);
      const requesterBefore = await scrape(requester.url);
      expect(before.contentType).toBe("text/plain; version=0.0.4; charset=utf-8");

      // A task that waits for information, watched while it waits, its events pushed to the requester's agent.
      const asked = await viaConnect.submit("summarization", { text: TEXT }, { waitMs: 5000 });
      expect(asked.task?.state).toBe(TaskState.INFO_NEEDED);
      const watched: ClientWatchItem[] = [];
      let snapshotSeen!: () => void;
      const snapshot = new Promise<void>((resolve) => (snapshotSeen = resolve));
      const watching = (async () => {
        for await (const item of viaConnect.watch(asked.taskId)) {
          watched.push(item);
          if (item.kind === "snapshot") snapshotSeen();
        }
      })();
      await snapshot;
      expect((await scrape(executor.url)).samples.get("synapse_watch_streams")).toBe(before.samples.get("synapse_watch_streams")! + 1);
      // The SSE event stream of the same task is a stream of its events too.
      const sse = new AbortController();
      const stream = await fetch(`${executor.url}/tasks/${asked.taskId}/events`, { headers: { Authorization: `Bearer ${await viaConnect.token()}` }, signal: sse.signal });
      expect(stream.status).toBe(200);
      await stream.body!.getReader().read();
      expect((await scrape(executor.url)).samples.get("synapse_watch_streams")).toBe(before.samples.get("synapse_watch_streams")! + 2);
      sse.abort();
      await eventually(async () => (await scrape(executor.url)).samples.get("synapse_watch_streams") === 1, "the SSE stream closes");
      expect((await viaConnect.provideInfo(asked.taskId, { max_sentences: 1 }, { waitMs: 5000 })).task?.state).toBe(TaskState.COMPLETED);
      await watching;
      await eventually(async () => (await scrape(executor.url)).samples.get("synapse_watch_streams") === 0, "the Watch stream closes");
      const pushed = [];
      for await (const item of requester.agent.inbox.events("executor_metrics", asked.taskId)) pushed.push(item);

      // Two tasks over gRPC, read back once.
      const quick = [await viaGrpc.submit("text_analysis", { text: TEXT }, { waitMs: 5000 }), await viaGrpc.submit("text_analysis", { text: TEXT }, { waitMs: 5000 })];
      for (const sent of quick) expect(sent.task?.state).toBe(TaskState.COMPLETED);
      expect((await viaGrpc.getTask(quick[0]!.taskId)).state).toBe(TaskState.COMPLETED);

      // A tampered envelope in each protocol: refused as signature_invalid.
      for (const protocol of PROTOCOLS) {
        const envelope = viaGrpc.envelope(...taskRequest(`tampered-${protocol.name}`));
        const tampered = { ...envelope, payload: Uint8Array.from(envelope.payload, (b, i) => (i === 0 ? b ^ 1 : b)) };
        expect(await refusal(clientFor(P2PService, protocol, executor.url).send({ envelope: tampered }))).toMatchObject({ code: Code.Unauthenticated, protocolCode: "signature_invalid" });
      }

      const logs = [
        watched.flatMap((item) => (item.kind === "event" ? [{ type: item.event.type, state: item.state }] : [])),
        ...(await Promise.all(quick.map((sent) => eventsOf(viaGrpc, sent.taskId)))),
      ];
      const events = logs.flat().length;
      expect(pushed.length).toBe(logs[0]!.length);
      // The last push is counted when its answer is back, which may be a moment after the requester's agent kept it.
      await eventually(async () => delta(before, await scrape(executor.url), "synapse_callback_pushes_total", { outcome: "delivered" }) === pushed.length, "every push counted");
      const after = await scrape(executor.url);

      // RPCs by procedure, protocol and code, with their latency.
      const rpcs: Array<[string, string, string, number]> = [
        [SEND, "connect", "ok", 2],
        [SEND, "grpc", "ok", 2],
        ["synapse.v1.P2PService/Watch", "connect", "ok", 1],
        ["synapse.v1.P2PService/GetTask", "grpc", "ok", 1],
        [SEND, "connect", "unauthenticated", 2],
        [SEND, "grpc", "unauthenticated", 1],
        [SEND, "grpc-web", "unauthenticated", 1],
      ];
      for (const [procedure, protocol, code, count] of rpcs) {
        expect(delta(before, after, "synapse_rpc_requests_total", { procedure, protocol, code }), `${procedure} ${protocol} ${code}`).toBe(count);
        expectHistogram(before, after, "synapse_rpc_duration_seconds", { procedure, protocol, code }, count);
      }
      // Refusals by protocol error code.
      expect(delta(before, after, "synapse_refusals_total", { procedure: SEND, code: "signature_invalid" })).toBe(4);
      expect(total(after, "synapse_refusals_total") - total(before, "synapse_refusals_total")).toBe(4);

      // Messages by type and direction: taken (tampered ones never are) and signed.
      expect(delta(before, after, "synapse_messages_total", { type: "p2p:task_request", direction: "received" })).toBe(3);
      expect(delta(before, after, "synapse_messages_total", { type: "p2p:task_info_provided", direction: "received" })).toBe(1);
      expect(total(after, "synapse_messages_total", { direction: "received" }) - total(before, "synapse_messages_total", { direction: "received" })).toBe(4);
      const { transitions, types } = tally(logs);
      expect(types.get(MessageType.TASK_COMPLETE)).toBe(3);
      for (const [type, count] of types) {
        expect(delta(before, after, "synapse_messages_total", { type: wireName(type), direction: "sent" }), wireName(type)).toBe(count);
      }

      // State transitions, exactly those the event logs show.
      expect(transitions.size).toBeGreaterThan(2);
      for (const [key, count] of transitions) {
        const [from, to] = key.split(" ") as [string, string];
        expect(delta(before, after, "synapse_task_transitions_total", { from, to }), key).toBe(count);
      }
      expect(total(after, "synapse_task_transitions_total") - total(before, "synapse_task_transitions_total")).toBe([...transitions.values()].reduce((a, b) => a + b, 0));
      expect(delta(before, after, "synapse_task_lifetime_seconds_count", { state: "completed" })).toBe(3);

      // Tasks by state, counted in the store; no Watch left open.
      expect(after.samples.get('synapse_tasks{state="completed"}')).toBe(3);
      expect(after.samples.get('synapse_tasks{state="info_needed"}')).toBe(0);
      expect(after.samples.get("synapse_watch_streams")).toBe(0);

      // Callback pushes, one per event of the task that asked for them.
      expect(delta(before, after, "synapse_callback_pushes_total", { outcome: "retried" })).toBe(0);
      expect(delta(before, after, "synapse_callback_pushes_total", { outcome: "given_up" })).toBe(0);

      // Store writes: each task created once, each later event committed.
      expectHistogram(before, after, "synapse_store_commit_duration_seconds", { operation: "create_task", outcome: "ok" }, 3);
      expect(delta(before, after, "synapse_store_commit_duration_seconds_count", { operation: "commit", outcome: "ok" })).toBeGreaterThanOrEqual(events - 3);

      // The requester's agent took every push as a message and answered each Send.
      const requesterAfter = await scrape(requester.url);
      for (const [type, count] of tally([logs[0]!]).types) {
        expect(delta(requesterBefore, requesterAfter, "synapse_messages_total", { type: wireName(type), direction: "received" }), wireName(type)).toBe(count);
      }
      expect(total(requesterAfter, "synapse_rpc_requests_total", { procedure: SEND, code: "ok" }) - total(requesterBefore, "synapse_rpc_requests_total", { procedure: SEND, code: "ok" })).toBe(pushed.length);

      // The families say what they are; the process's own metrics come along.
      expect(after.types.get("synapse_rpc_duration_seconds")).toBe("histogram");
      expect(after.types.get("synapse_rpc_requests_total")).toBe("counter");
      expect(after.types.get("synapse_watch_streams")).toBe("gauge");
      expect(after.types.get("synapse_tasks")).toBe("gauge");
      expect(after.types.get("synapse_store_commit_duration_seconds")).toBe("histogram");
      expect(after.samples.get("process_cpu_user_seconds_total")).toBeGreaterThan(0);
    } finally {
      await executor.close();
      await requester.close();
    }
  });

  it("answers HEAD without a body and other methods with 405; a server started with metrics off has no /metrics", async () => {
    const server = await startTestServer();
    const quiet = await startTestServer({ metrics: false });
    try {
      const head = await fetch(`${server.url}/metrics`, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe("");
      const post = await fetch(`${server.url}/metrics`, { method: "POST" });
      expect(post.status).toBe(405);
      expect(post.headers.get("allow")).toBe("GET, HEAD");
      expect(quiet.metrics).toBeUndefined();
      const off = await fetch(`${quiet.url}/metrics`);
      expect(off.status).toBe(404);
      expect(await off.text()).not.toContain("synapse_rpc_requests_total");
    } finally {
      await server.close();
      await quiet.close();
    }
  });

  it("is what docs/OBSERVABILITY.md lists and what the sample Grafana dashboard queries", async () => {
    const server = await startTestServer();
    try {
      const { types } = await scrape(server.url);
      const ours = [...types.keys()].filter((name) => name.startsWith("synapse_"));
      expect(ours.length).toBeGreaterThanOrEqual(10);
      const doc = await readFile(new URL("../docs/OBSERVABILITY.md", import.meta.url), "utf8");
      const documented = new Set([...doc.matchAll(/^\| `(synapse_[a-z_]+)` \| (\w+) \|/gm)].map((m) => `${m[1]} ${m[2]}`));
      expect(documented).toEqual(new Set(ours.map((name) => `${name} ${types.get(name)}`)));

      const dashboard = JSON.parse(await readFile(new URL("../docs/grafana-dashboard.json", import.meta.url), "utf8")) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
      const queried = new Set(dashboard.panels.flatMap((panel) => (panel.targets ?? []).flatMap((target) => [...target.expr.matchAll(/\b((?:synapse|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!))));
      expect(queried.size).toBeGreaterThanOrEqual(12);
      for (const name of queried) {
        const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, "");
        expect(types.has(family), `${name} is exported`).toBe(true);
        if (family !== name) expect(types.get(family)).toBe("histogram");
      }
      for (const name of ours) expect([...queried].some((q) => q === name || q.startsWith(`${name}_`)), `${name} is on the dashboard`).toBe(true);
    } finally {
      await server.close();
    }
  });
});
