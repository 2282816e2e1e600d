// A handler's ctx.signal is made only when the handler (or the run) first
// asks for it, and is the same signal whenever it is asked for: aborted when
// the run is stopped, whether it was first read before the stop or after.
import { afterEach, describe, expect, it } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { TaskHandler } from "../src/agent/handler.js";
import { referenceHandlers } from "../src/agent/reference/index.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("a handler's signal", () => {
  it("is aborted by a cancel whether the handler read it before the stop or first reads it after", async () => {
    const seen: Array<{ when: string; aborted: boolean; reason: string; same: boolean }> = [];
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    // text_analysis runs this instead: one run reads its signal at once, the other only after the cancel.
    const handler: TaskHandler = {
      executeTask: async (ctx) => {
        const early = ctx.payload.early === true ? ctx.signal : undefined;
        await sleep(400);
        const late = ctx.signal;
        seen.push({ when: early ? "read before" : "read after", aborted: late.aborted, reason: (late.reason as Error | undefined)?.name ?? "", same: early === undefined || early === late });
        if (seen.length === 2) done();
        return { output: {} };
      },
    };
    server = await startTestServer({ handlers: new Map([...referenceHandlers(), ["text_analysis", handler]]) });
    const client = await connectClient(server);
    const first = await client.submit("text_analysis", { text: "x", early: true });
    const second = await client.submit("text_analysis", { text: "x" });
    await sleep(100);
    for (const { taskId } of [first, second]) {
      const cancelled = await client.cancel(taskId, "stop", 5000);
      expect(cancelled.task?.state).toBe(TaskState.CANCELLED);
    }
    await finished;
    expect(seen.sort((a, b) => a.when.localeCompare(b.when))).toEqual([
      { when: "read after", aborted: true, reason: "AbortError", same: true },
      { when: "read before", aborted: true, reason: "AbortError", same: true },
    ]);
  });
});
