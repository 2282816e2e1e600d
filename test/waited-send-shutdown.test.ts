// A waited Send whose wait a shutdown cuts short is answered UNAVAILABLE
// (agent_not_ready, with a retry-after), not with the task as it happened to
// be: the message was processed, and sending the same envelope again to the
// restarted agent gets the same reply and the wait, through to the outcome.
// A real `synapse serve`, stopped with SIGTERM and started again on its port.
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { SynapseClient } from "../src/client/requester.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { uuidV7 } from "../src/protocol/ids.js";
import { startServe, type ServeProcess } from "./helpers/cli.js";
import { requesterIdentity, tempDir } from "./helpers/server.js";

/** A resumable reference task that runs for a few seconds: a shutdown stops it, a restart runs it again. */
const SLOW = { csv: `n\n${Array.from({ length: 12 }, (_, i) => i).join("\n")}`, delay_ms_per_row: 250 };

let running: ServeProcess[] = [];
afterEach(async () => {
  for (const served of running) await served.stop();
  running = [];
});

async function executing(client: SynapseClient, taskId: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await client.getTask(taskId).catch(() => undefined))?.state === TaskState.EXECUTING) return;
    await new Promise((done) => setTimeout(done, 25));
  }
  throw new Error(`task ${taskId} never ran`);
}

describe("a waited Send during a shutdown", () => {
  it("is UNAVAILABLE when the shutdown ends the wait, and the same envelope sent again waits for the outcome", async () => {
    const dataDir = await tempDir();
    const first = await startServe(["--data-dir", dataDir, "--log-level", "warn"]);
    running.push(first);
    const port = new URL(first.url).port;
    const once = await SynapseClient.connect({ baseUrl: first.url, identity: await requesterIdentity(), sendRetries: 0 });
    const again = await SynapseClient.connect({ baseUrl: first.url, identity: await requesterIdentity(), retryBaseDelayMs: 250, sendRetries: 6 });

    const cutId = uuidV7();
    const resentId = uuidV7();
    const cut = once.submit("data_analysis", SLOW, { taskId: cutId, waitMs: 60_000 }).catch((error: unknown) => ConnectError.from(error));
    const resent = again.submit("data_analysis", SLOW, { taskId: resentId, waitMs: 60_000 });
    // Both tasks are running before the signal.
    await executing(once, cutId);
    await executing(again, resentId);

    expect(await first.stop()).toBe(0);
    running = [];
    const error = await cut;
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unavailable);
    const detail = findErrorDetail(error);
    expect(detail?.protocolCode).toBe("agent_not_ready");
    expect(Number(detail?.retryAfterSeconds)).toBeGreaterThan(0);
    expect((error as ConnectError).rawMessage).toContain("send the same envelope again");

    // Back on the same port: the client that sends again gets the reply and the outcome.
    running.push(await startServe(["--data-dir", dataDir, "--log-level", "warn"], { PORT: port }));
    const answered = await resent;
    expect(answered.reply?.type).toBe(MessageType.TASK_CONFIRM);
    expect(answered.taskId).toBe(resentId);
    expect(answered.task?.state).toBe(TaskState.COMPLETED);
    expect((await again.listTasks({})).tasks.map((task) => task.taskId)).toEqual([resentId]);
  }, 120_000);
});
