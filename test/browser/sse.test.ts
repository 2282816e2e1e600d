// A browser's own EventSource on a task's SSE stream, in headless Chromium
// (Debian's, driven by playwright-core). The page is served through a TCP
// proxy the test can cut: EventSource passes the token in the query (it
// cannot set headers), receives every signed event with its sequence as
// the id, reconnects by itself after the cut sending Last-Event-ID, and
// loses and repeats nothing; it stops after the end event.
import { fromJson } from "@bufbuild/protobuf";
import net from "node:net";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SignedMessageSchema } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { SynapseClient } from "../../src/client/requester.js";
import { connectClient, startTestServer, type TestServer } from "../helpers/server.js";

const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/** A TCP proxy to `port` whose open connections the test can cut while it keeps accepting new ones. */
async function cuttableProxy(port: number): Promise<{ url: string; cut(): void; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    const upstream = net.connect(port, "127.0.0.1");
    sockets.add(socket).add(upstream);
    socket.pipe(upstream).pipe(socket);
    const drop = () => {
      socket.destroy();
      upstream.destroy();
      sockets.delete(socket);
      sockets.delete(upstream);
    };
    socket.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe("EventSource in Chromium", () => {
  let server: TestServer;
  let client: SynapseClient;
  let browser: Browser;
  let proxy: Awaited<ReturnType<typeof cuttableProxy>>;

  beforeAll(async () => {
    server = await startTestServer({ sseHeartbeatMs: 200 });
    client = await connectClient(server);
    proxy = await cuttableProxy(server.port);
    browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: CHROMIUM_ARGS });
  });
  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await server?.close();
  });

  it("receives every signed event once, across a dropped connection it resumes by itself", async () => {
    const page = await browser.newPage();
    // Same origin as the stream: the console page allows connections to its own origin only.
    await page.goto(`${proxy.url}/console`);
    const csv = ["v", ...Array.from({ length: 8 }, (_, i) => String(i))].join("\n");
    const { taskId } = await client.submit("data_analysis", { csv, delay_ms_per_row: 300 });
    const token = await client.token(120);
    await page.evaluate(
      ({ path }) => {
        const state = { events: [] as Array<{ id: string; data: string }>, opened: 0, errors: 0, ended: "" };
        (globalThis as unknown as { sse: typeof state }).sse = state;
        const source = new EventSource(path);
        source.onopen = () => state.opened++;
        source.onerror = () => state.errors++;
        source.onmessage = (event) => state.events.push({ id: event.lastEventId, data: event.data as string });
        source.addEventListener("end", (event) => {
          state.ended = (event as unknown as { data: string }).data;
          source.close();
        });
      },
      { path: `/tasks/${encodeURIComponent(taskId)}/events?access_token=${token}` },
    );
    const count = () => page.evaluate(() => (globalThis as unknown as { sse: { events: unknown[] } }).sse.events.length);
    await expect.poll(count, { timeout: 10_000 }).toBeGreaterThanOrEqual(3);
    proxy.cut(); // the browser notices, waits the stream's retry time and reconnects with Last-Event-ID
    const state = await page.waitForFunction(() => (globalThis as unknown as { sse: { ended: string } }).sse.ended !== "", undefined, { timeout: 20_000 }).then(() =>
      page.evaluate(() => (globalThis as unknown as { sse: { events: Array<{ id: string; data: string }>; opened: number; errors: number; ended: string } }).sse),
    );
    expect(state.opened).toBeGreaterThanOrEqual(2);
    expect(state.errors).toBeGreaterThanOrEqual(1);
    const task = await client.getTask(taskId);
    expect(task.state).toBe(TaskState.COMPLETED);
    expect(JSON.parse(state.ended)).toEqual({ state: "TASK_STATE_COMPLETED", lastSequence: String(task.lastSequence) });
    expect(state.events.map((event) => Number(event.id))).toEqual(Array.from({ length: Number(task.lastSequence) }, (_, i) => i + 1));
    for (const event of state.events) {
      const verified = await client.verify(fromJson(SignedMessageSchema, JSON.parse(event.data)).envelope!, { record: true });
      expect(String(verified.header.sequence)).toBe(event.id);
    }
    await page.close();
  });
});
