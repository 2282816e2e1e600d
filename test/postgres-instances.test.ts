// Several instances of one agent (same identity) on one PostgreSQL database
// behave as one agent: behind a TCP proxy, each step of a task may land on
// another instance; the concurrency limit holds across them; when one dies
// (kill -9) the other takes its tasks over once the lease expires.
import { Code, ConnectError } from "@connectrpc/connect";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { SynapseClient } from "../src/client/requester.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { fromValue } from "../src/protocol/json-values.js";
import { instanceProxy, startAgentProcess, type AgentProcess } from "./helpers/agent-process.js";
import { freshDatabase, postgresAvailable } from "./helpers/postgres.js";
import { requesterIdentity, tempDir } from "./helpers/server.js";

const MAX_CONCURRENT = 4;
const LEASE_MS = 1500;

describe.skipIf(!postgresAvailable())("two instances of one agent on one PostgreSQL database", () => {
  let url: string;
  let dataDir: string;
  const instances: AgentProcess[] = [];
  let proxy: Awaited<ReturnType<typeof instanceProxy>>;
  let identity: AgentIdentity;

  const start = () =>
    startAgentProcess(["--data-dir", dataDir, "--store", url, "--runs", join(dataDir, "runs.log"), "--max-concurrent", String(MAX_CONCURRENT), "--run-lease-ms", String(LEASE_MS)]);
  /** A client whose every connection goes to instance `index` (through the proxy). */
  const via = async (index: number) => {
    proxy.pin(index);
    return SynapseClient.connect({ baseUrl: proxy.url, identity, transport: { protocol: "grpc" }, retryBaseDelayMs: 50 });
  };

  beforeAll(async () => {
    url = await freshDatabase();
    dataDir = await tempDir("synapse-instances-");
    // The same data dir: the same key files, so the same agent identity.
    instances.push(await start(), await start());
    proxy = await instanceProxy(instances.map((instance) => instance.port));
    identity = await requesterIdentity();
  }, 60_000);
  afterAll(async () => {
    await proxy?.close();
    await Promise.all(instances.map((instance) => instance.kill("SIGTERM")));
  });

  it("is one agent: the same identity at both instances, distinct instance ids", async () => {
    const [a, b] = [await via(0), await via(1)];
    expect(a.executor).toEqual(b.executor);
    expect(instances[0]!.instanceId).not.toBe(instances[1]!.instanceId);
  });

  it("holds max_concurrent_tasks across both instances", async () => {
    const clients = [await via(0), await via(1)];
    proxy.pin(undefined);
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        clients[i % 2]!.submit("work_once", { mode: "sleep", ms: 600_000 }).then(
          (submitted) => ({ ok: submitted.taskId }),
          (error: unknown) => ({ refused: ConnectError.from(error) }),
        ),
      ),
    );
    const accepted = outcomes.flatMap((o) => ("ok" in o ? [o.ok] : []));
    const refused = outcomes.flatMap((o) => ("refused" in o ? [o.refused] : []));
    expect(accepted).toHaveLength(MAX_CONCURRENT);
    for (const error of refused) {
      expect(error.code).toBe(Code.ResourceExhausted);
      expect(findErrorDetail(error)?.code).toBe(ErrorCode.CONCURRENCY_LIMIT);
    }
    // Cancelled at the other instance from the one that took each.
    for (const [i, taskId] of accepted.entries()) {
      expect((await clients[(i + 1) % 2]!.cancel(taskId)).task?.state).toBe(TaskState.CANCELLED);
    }
  });

  it("lets each step of a task land on another instance: submit, watch, provide-info, decide, cancel", async () => {
    // Need-info asked by a handler running at instance 0, answered at instance 1: the run at 0 wakes and completes.
    const submitted = await (await via(0)).submit("work_again", { mode: "info" }, { waitMs: 10_000 });
    expect(submitted.task?.state).toBe(TaskState.INFO_NEEDED);
    const watcher = await via(1);
    const watched: TaskState[] = [];
    const watching = (async () => {
      for await (const item of watcher.watch(submitted.taskId)) if (item.kind === "event") watched.push(item.state);
    })();
    const provided = await (await via(1)).provideInfo(submitted.taskId, { extra: "from the other instance" }, { waitMs: 10_000 });
    expect(provided.task?.state).toBe(TaskState.COMPLETED);
    expect(fromValue(provided.task?.result?.output)).toEqual({ attempt: 1, extra: "from the other instance" });
    await watching;
    expect(watched.at(-1)).toBe(TaskState.COMPLETED);

    // A decision asked at instance 1, given at instance 0, the outcome read at instance 1.
    const human = await (await via(1)).submit("work_again", { mode: "human" }, { waitMs: 10_000 });
    expect(human.task?.state).toBe(TaskState.NEED_HUMAN);
    const decided = await (await via(0)).decide(human.taskId, { action: "approve" }, { waitMs: 10_000 });
    expect(decided.task?.state).toBe(TaskState.COMPLETED);
    expect((await (await via(1)).getTask(human.taskId)).state).toBe(TaskState.COMPLETED);

    // Admission asked for information at instance 0; provided at instance 1, which decides again and runs it.
    const summary = await (await via(0)).submit("summarization", { text: "One. Two. Three." }, { waitMs: 10_000 });
    expect(summary.task?.state).toBe(TaskState.INFO_NEEDED);
    expect((await (await via(1)).provideInfo(summary.taskId, { max_sentences: 1 }, { waitMs: 10_000 })).task?.state).toBe(TaskState.COMPLETED);

    // Running at instance 1, cancelled at instance 0: the run at 1 stops.
    const long = await (await via(1)).submit("work_once", { mode: "sleep", ms: 600_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const cancelled = await (await via(0)).cancel(long.taskId, "changed my mind");
    expect(cancelled.reply?.type).toBe(MessageType.TASK_ACK);
    expect((await (await via(1)).getTask(long.taskId)).state).toBe(TaskState.CANCELLED);
    // Both instances served.
    expect(new Set(proxy.routed)).toEqual(new Set([0, 1]));
  });

  it("shares the work of many clients connecting in turn", async () => {
    proxy.pin(undefined);
    const before = proxy.routed.length;
    const clients = await Promise.all(Array.from({ length: 8 }, () => SynapseClient.connect({ baseUrl: proxy.url, identity, transport: { protocol: "grpc" } })));
    const results = await Promise.all(clients.map((client) => client.submit("text_analysis", { text: "Shared. Work." }, { waitMs: 10_000 })));
    for (const result of results) expect(result.task?.state).toBe(TaskState.COMPLETED);
    const served = proxy.routed.slice(before);
    expect(served.filter((i) => i === 0).length).toBeGreaterThan(0);
    expect(served.filter((i) => i === 1).length).toBeGreaterThan(0);
  });

  it("takes over a dead instance's tasks once its lease expires", async () => {
    const resumable = await (await via(0)).submit("work_again", { mode: "sleep", ms: 600_000, ms_resumed: 100 });
    const once = await (await via(0)).submit("work_once", { mode: "sleep", ms: 600_000 });
    const survivor = await via(1);
    const running = async () => (await survivor.getTask(resumable.taskId)).state === TaskState.EXECUTING && (await survivor.getTask(once.taskId)).state === TaskState.EXECUTING;
    for (let i = 0; i < 50 && !(await running()); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    await instances[0]!.kill("SIGKILL");
    const done = await survivor.waitFor(resumable.taskId);
    expect(done.state).toBe(TaskState.COMPLETED);
    expect(fromValue(done.result?.output)).toEqual({ attempt: 2 });
    const failed = await survivor.waitFor(once.taskId);
    expect(failed).toMatchObject({ state: TaskState.FAILED, error: { code: ErrorCode.AGENT_NOT_READY, recoverable: true } });
    // Its log reads the same from the survivor: gapless and signed.
    let expected = 1;
    for await (const item of survivor.watch(resumable.taskId)) if (item.kind === "event") expect(item.sequence).toBe(expected++);
  }, 60_000);
});
