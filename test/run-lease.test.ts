// A handler run holds its task's lease until the run ends. A run that records
// the task's end (completed or failed) gives the lease up in that same commit;
// a run that ends without recording (its task was cancelled) gives it up after.
import { afterEach, describe, expect, it, vi } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

const slowCsv = ["n", ...Array.from({ length: 200 }, (_, i) => String(i))].join("\n");

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200 && !(await check()); i++) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe("a handler run's lease", () => {
  it("is given up by the commit that records the end, with no separate release", async () => {
    server = await startTestServer();
    const client = await connectClient(server);
    const releases = vi.spyOn(server.agent.store, "releaseLeases");
    const completed = await client.submit("text_analysis", { text: "One sentence here. And another." }, { waitMs: 5000 });
    const failed = await client.submit("data_analysis", { csv: "" }, { waitMs: 5000 });
    expect(completed.task?.state).toBe(TaskState.COMPLETED);
    expect(failed.task?.state).toBe(TaskState.FAILED);
    // The run's own bookkeeping ends a turn after the commit.
    await new Promise((resolve) => setTimeout(resolve, 50));
    for (const taskId of [completed.taskId, failed.taskId]) expect((await server.agent.store.getTask(taskId))?.leaseOwner).toBe("");
    expect(releases).not.toHaveBeenCalled();
  });

  it("is released after a run that ends without recording (its task was cancelled)", async () => {
    server = await startTestServer();
    const client = await connectClient(server);
    const { taskId } = await client.submit("data_analysis", { csv: slowCsv, delay_ms_per_row: 50 });
    const running = server;
    await until(async () => (await running.agent.store.getTask(taskId))?.leaseOwner === running.agent.instanceId);
    expect((await server.agent.store.getTask(taskId))?.leaseOwner).toBe(server.agent.instanceId);
    const releases = vi.spyOn(server.agent.store, "releaseLeases");
    await client.cancel(taskId, "no longer needed", 5000);
    await until(async () => (await running.agent.store.getTask(taskId))?.leaseOwner === "");
    const left = await server.agent.store.getTask(taskId);
    expect(left?.state).toBe(TaskState.CANCELLED);
    expect(left?.leaseOwner).toBe("");
    expect(releases).toHaveBeenCalledWith(server.agent.instanceId, [taskId]);
  });
});
