// Limits and timeouts: max_concurrent_tasks, TaskTimeout,
// max_task_duration_seconds, decision deadlines, output schemas, shutdown.
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { TaskHandler } from "../src/agent/handler.js";
import { REFERENCE_TASK_TYPES } from "../src/agent/reference/task-types.js";
import { dataAnalysisHandler } from "../src/agent/reference/data-analysis.js";
import { referenceHandlers } from "../src/agent/reference/index.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { connectClient, startTestServer } from "./helpers/server.js";

const slowCsv = ["n", ...Array.from({ length: 200 }, (_, i) => String(i))].join("\n");

describe("max_concurrent_tasks", () => {
  it("refuses a task beyond the limit with 4004, RESOURCE_EXHAUSTED and retry-after, and takes it once a slot frees", async () => {
    const server = await startTestServer({ capabilities: { maxConcurrentTasks: 2 } });
    try {
      const client = await connectClient(server);
      const first = await client.submit("data_analysis", { csv: slowCsv, delay_ms_per_row: 20 });
      await client.submit("data_analysis", { csv: slowCsv, delay_ms_per_row: 20 });
      const error = await client.submit("text_analysis", { text: "Hi." }).catch((e: unknown) => ConnectError.from(e));
      expect(error).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.ResourceExhausted);
      const detail = findErrorDetail(error);
      expect(detail?.code).toBe(ErrorCode.CONCURRENCY_LIMIT);
      expect(detail?.retryAfterSeconds).toBeGreaterThan(0);
      await client.cancel(first.taskId);
      const later = await client.submit("text_analysis", { text: "Hi." }, { waitMs: 5000 });
      expect(later.task?.state).toBe(TaskState.COMPLETED);
    } finally {
      await server.close();
    }
  });
});

describe("timeouts", () => {
  it("aborts a handler past TaskTimeout: the task fails with execution_timeout", async () => {
    const server = await startTestServer({ config: { taskTimeoutMs: 300 } });
    try {
      const client = await connectClient(server);
      const { task } = await client.submit("data_analysis", { csv: slowCsv, delay_ms_per_row: 20 }, { waitMs: 5000 });
      expect(task?.state).toBe(TaskState.FAILED);
      expect(task?.error).toMatchObject({ code: ErrorCode.EXECUTION_TIMEOUT, recoverable: true });
    } finally {
      await server.close();
    }
  });

  it("aborts a handler past max_task_duration_seconds: the task fails with 2004", async () => {
    const server = await startTestServer({ capabilities: { maxTaskDurationSeconds: 1 } });
    try {
      const client = await connectClient(server);
      const { task } = await client.submit("data_analysis", { csv: slowCsv, delay_ms_per_row: 20 }, { waitMs: 5000 });
      expect(task?.state).toBe(TaskState.FAILED);
      expect(task?.error?.code).toBe(ErrorCode.TASK_DURATION_EXCEEDED);
      expect(ErrorCode.TASK_DURATION_EXCEEDED).toBe(2004);
    } finally {
      await server.close();
    }
  });

  it("fails a task whose human decision does not come before its deadline", async () => {
    const waits: TaskHandler = {
      async executeTask(ctx) {
        await ctx.askHuman({ code: "sign_off", message: "sign off?", deadline: new Date(Date.now() + 200) });
        return { output: {} };
      },
    };
    const server = await startTestServer({ handlers: new Map([["waits", waits]]), capabilities: { supportedTaskTypes: [{ type: "waits", name: "waits" }] } });
    try {
      const client = await connectClient(server);
      const { taskId, task } = await client.submit("waits", {}, { waitMs: 5000 });
      expect(task?.state).toBe(TaskState.NEED_HUMAN);
      expect(task?.pendingDecision?.deadline).toBeDefined();
      const done = await client.waitFor(taskId);
      expect(done.state).toBe(TaskState.FAILED);
      expect(done.error?.message).toContain("deadline");
    } finally {
      await server.close();
    }
  });
});

describe("results and handler faults", () => {
  it("fails a task whose result does not match the output schema with output_invalid", async () => {
    const wrong: TaskHandler = { executeTask: async () => ({ output: { characters: "many" } }) };
    const server = await startTestServer({ handlers: new Map([["text_analysis", wrong]]) });
    try {
      const client = await connectClient(server);
      const { task } = await client.submit("text_analysis", { text: "Hi." }, { waitMs: 5000 });
      expect(task?.state).toBe(TaskState.FAILED);
      expect(task?.error?.code).toBe(ErrorCode.OUTPUT_INVALID);
    } finally {
      await server.close();
    }
  });

  it("fails a task whose handler throws with execution_failed, and keeps serving", async () => {
    const broken: TaskHandler = {
      executeTask: async () => {
        throw new Error("boom");
      },
    };
    const server = await startTestServer({ handlers: new Map([...referenceHandlers(), ["broken", broken]]), capabilities: { supportedTaskTypes: [...REFERENCE_TASK_TYPES, { type: "broken", name: "broken" }] } });
    try {
      const client = await connectClient(server);
      const { task } = await client.submit("broken", {}, { waitMs: 5000 });
      expect(task?.error).toMatchObject({ code: ErrorCode.EXECUTION_FAILED, message: "boom" });
      expect((await client.submit("text_analysis", { text: "Still here." }, { waitMs: 5000 })).task?.state).toBe(TaskState.COMPLETED);
    } finally {
      await server.close();
    }
  });
});

describe("shutdown", () => {
  it("fails running tasks of handlers that cannot resume as agent_not_ready (recoverable), and ends watches", async () => {
    // The reference data_analysis, declared not resumable.
    const once: TaskHandler = { executeTask: (ctx) => dataAnalysisHandler.executeTask(ctx) };
    const server = await startTestServer({ handlers: new Map([...referenceHandlers(), ["data_analysis", once]]) });
    const client = await connectClient(server);
    const { taskId } = await client.submit("data_analysis", { csv: slowCsv, delay_ms_per_row: 50 });
    const seen: TaskState[] = [];
    const watching = (async () => {
      for await (const item of client.watch(taskId)) if (item.kind === "event") seen.push(item.state);
    })().catch((e: unknown) => ConnectError.from(e));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await server.close();
    await watching;
    expect(seen.at(-1)).toBe(TaskState.FAILED);
    const last = await server.agent.reader.getTask(taskId, client.agentId);
    expect(last.error).toMatchObject({ code: ErrorCode.AGENT_NOT_READY, recoverable: true });
  });

  it("leaves a resumable handler's running task as it is, with its lease given up, for a restart to resume", async () => {
    const server = await startTestServer();
    const client = await connectClient(server);
    const { taskId } = await client.submit("data_analysis", { csv: slowCsv, delay_ms_per_row: 50 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await server.agent.store.getTask(taskId))?.leaseOwner).toBe(server.agent.instanceId);
    await server.close();
    const left = await server.agent.store.getTask(taskId);
    expect(left).toMatchObject({ state: TaskState.EXECUTING, leaseOwner: "", executionAttempts: 1 });
    expect(left?.error).toBeUndefined();
  });
});
