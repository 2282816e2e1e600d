// A Send that waits for its task's outcome (SendRequest.wait) when the
// agent begins to shut down: it stops waiting and answers at once, as a
// normal reply with the task as it is then (not an error), well before the
// shutdown's grace period ends.
import { afterAll, describe, expect, it } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

let server: TestServer | undefined;
afterAll(async () => {
  await server?.close().catch(() => undefined);
});

describe("a waited Send during shutdown", () => {
  it("answers the task as it is when the shutdown begins", async () => {
    server = await startTestServer({ shutdownGraceMs: 8_000 });
    const client = await connectClient(server);
    const started = Date.now();
    // Three rows at 4 s each: the task is still working when the shutdown begins.
    const waiting = client.submit("data_analysis", { csv: "n\n1\n2\n3", delay_ms_per_row: 4000 }, { waitMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const closing = server.close();
    const answered = await waiting;
    const tookMs = Date.now() - started;
    expect(answered.reply?.header.messageType).toBe(MessageType.TASK_CONFIRM);
    expect(answered.task?.state).toBe(TaskState.EXECUTING);
    // Answered when the draining began, not when the grace ran out (or the task finished).
    expect(tookMs).toBeLessThan(4_000);
    await closing;
    server = undefined;
  });
});
