// A Send that waits for its task's outcome (SendRequest.wait) when the
// agent begins to shut down: it stops waiting and answers at once
// UNAVAILABLE (agent_not_ready, with a retry-after), well before the
// shutdown's grace period ends, and the task it made is kept. Sending the
// same envelope again after a restart is test/waited-send-shutdown.test.ts.
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { findErrorDetail } from "../src/protocol/errors.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

let server: TestServer | undefined;
afterAll(async () => {
  await server?.close().catch(() => undefined);
});

describe("a waited Send during shutdown", () => {
  it("answers UNAVAILABLE at once when the shutdown begins", async () => {
    server = await startTestServer({ shutdownGraceMs: 8_000 });
    const client = await connectClient(server, { sendRetries: 0 });
    const started = Date.now();
    // Three rows at 4 s each: the task is still working when the shutdown begins.
    const waiting = client.submit("data_analysis", { csv: "n\n1\n2\n3", delay_ms_per_row: 4000 }, { waitMs: 60_000 }).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const closing = server.close();
    const answered = await waiting;
    const tookMs = Date.now() - started;
    expect(answered).toBeInstanceOf(ConnectError);
    expect((answered as ConnectError).code).toBe(Code.Unavailable);
    expect(findErrorDetail(answered as ConnectError)?.protocolCode).toBe("agent_not_ready");
    expect(findErrorDetail(answered as ConnectError)?.retryAfterSeconds).toBeGreaterThan(0);
    // Answered when the draining began, not when the grace ran out (or the task finished).
    expect(tookMs).toBeLessThan(4_000);
    await closing;
    server = undefined;
  });
});
