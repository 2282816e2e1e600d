// A Send the server refuses while it shuts down is UNAVAILABLE, never
// INTERNAL, and the client sends the same envelope again (Send is idempotent
// by message id): against an HTTP/2 front that answers RST_STREAM
// REFUSED_STREAM to the first Sends, and against a real `synapse serve`
// stopped with SIGTERM and started again on the same port while Sends are in
// flight.
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { SynapseClient } from "../src/client/requester.js";
import { createTransport } from "../src/client/transport.js";
import { startServe } from "./helpers/cli.js";
import { requesterIdentity, startTestServer, tempDir, type TestServer } from "./helpers/server.js";

const SEND = "/synapse.v1.P2PService/Send";

interface RefusingFront {
  url: string;
  /** The request bodies of every Send that reached the front, refused or passed on. */
  sends: Buffer[];
  /** Refuse the next `count` Sends (and every Watch, with `watches`). */
  refuse(count: number, options?: { watches?: boolean }): void;
  close(): Promise<void>;
}

/** An h2c front for a server: passes calls on, or resets them with REFUSED_STREAM before reading them. */
async function refusingFront(upstreamUrl: string): Promise<RefusingFront> {
  const upstream = http2.connect(upstreamUrl);
  upstream.on("error", () => {});
  let refuseSends = 0;
  let refuseWatches = false;
  const sends: Buffer[] = [];
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    const path = String(headers[":path"]);
    if ((path === SEND && refuseSends > 0) || (path.endsWith("/Watch") && refuseWatches)) {
      if (path !== SEND) return void stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      refuseSends--;
      // Read first, so that the test sees what was sent; still refused before anything acted on it.
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.once("end", () => {
        sends.push(Buffer.concat(chunks));
        stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      });
      return;
    }
    if (path === SEND) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.once("end", () => sends.push(Buffer.concat(chunks)));
    }
    const forwarded = Object.fromEntries(Object.entries(headers).filter(([name]) => name !== ":authority" && name !== ":scheme"));
    const call = upstream.request(forwarded);
    call.on("error", () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    stream.pipe(call);
    call.on("response", (responseHeaders) => {
      const { [":status"]: status, ...rest } = responseHeaders;
      stream.respond({ ":status": status, ...rest }, { waitForTrailers: true });
      let trailers: http2.OutgoingHttpHeaders = {};
      call.on("trailers", (received) => (trailers = received));
      stream.on("wantTrailers", () => stream.sendTrailers(trailers));
      call.pipe(stream);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    sends,
    refuse(count, options = {}) {
      refuseSends = count;
      refuseWatches = options.watches ?? false;
    },
    close: async () => {
      // Clients keep their sessions open: end them, or close would wait for them.
      for (const session of sessions) session.destroy();
      upstream.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("REFUSED_STREAM", () => {
  let server: TestServer;
  let front: RefusingFront;
  beforeAll(async () => {
    server = await startTestServer();
    front = await refusingFront(server.url);
  });
  afterAll(async () => {
    await front.close();
    await server.close();
  });

  const connect = async (options: { sendRetries?: number } = {}) =>
    SynapseClient.connect({ baseUrl: front.url, identity: await requesterIdentity(), transport: { protocol: "grpc" }, retryBaseDelayMs: 50, ...options });

  it("is UNAVAILABLE, not INTERNAL, for a Send and for a Watch", async () => {
    const client = await connect({ sendRetries: 0 });
    front.refuse(1, { watches: true });
    const refused = await client.submit("text_analysis", { text: "Refused." }).catch((error: unknown) => ConnectError.from(error));
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.Unavailable);
    expect((refused as ConnectError).message).toContain("REFUSED_STREAM");
    // A stream refused the same way: the error the caller iterating it sees.
    const raw = createClient(P2PService, createTransport(front.url, { protocol: "grpc" }));
    const watched = await (async () => {
      for await (const item of raw.watch({ taskId: "any" })) void item;
    })().catch((error: unknown) => ConnectError.from(error));
    expect((watched as ConnectError).code).toBe(Code.Unavailable);
    front.refuse(0);
  });

  it("a refused Send is sent again, the same envelope, and the task is made once", async () => {
    const client = await connect();
    front.sends.length = 0;
    front.refuse(2);
    const sent = await client.submit("text_analysis", { text: "Sent again. And again." }, { waitMs: 10_000 });
    expect(sent.task?.state).toBe(TaskState.COMPLETED);
    // Two refused, the third passed on: three times the same bytes.
    expect(front.sends.length).toBe(3);
    expect(front.sends.every((body) => body.equals(front.sends[0]!))).toBe(true);
    const listed = await client.listTasks({});
    expect(listed.tasks.filter((task) => task.taskId === sent.taskId)).toHaveLength(1);
  });

  it("gives up after sendRetries", async () => {
    const client = await connect({ sendRetries: 2 });
    front.sends.length = 0;
    front.refuse(5);
    const refused = await client.submit("text_analysis", { text: "Never through." }).catch((error: unknown) => ConnectError.from(error));
    expect((refused as ConnectError).code).toBe(Code.Unavailable);
    expect(front.sends.length).toBe(3);
    front.refuse(0);
  });
});

/** A transport that notes the code of every failed Send attempt. */
function noting(inner: Transport, failures: Code[]): Transport {
  return {
    unary: (...args) =>
      inner.unary(...args).catch((error: unknown) => {
        failures.push(ConnectError.from(error).code);
        throw error;
      }),
    stream: (...args) => inner.stream(...args),
  };
}

describe("Sends in flight while synapse serve restarts", () => {
  it("every Send gets its answer, from the server before or after the restart, and each task is made once", async () => {
    const dataDir = await tempDir();
    const first = await startServe(["--data-dir", dataDir, "--log-level", "warn"]);
    const port = new URL(first.url).port;
    const failures: Code[] = [];
    const client = await SynapseClient.connect({
      baseUrl: first.url,
      identity: await requesterIdentity(),
      rpcTransport: noting(createTransport(first.url, { protocol: "grpc" }), failures),
      retryBaseDelayMs: 100,
      sendRetries: 8,
    });
    const submits: Array<Promise<{ taskId: string }>> = [];
    const submitting = (async () => {
      for (let i = 0; i < 60; i++) {
        submits.push(client.submit("text_analysis", { text: `Task ${i}. In flight.` }));
        await new Promise((done) => setTimeout(done, 25));
      }
    })();
    await new Promise((done) => setTimeout(done, 300));
    expect(await first.stop()).toBe(0);
    const second = await startServe(["--data-dir", dataDir, "--log-level", "warn"], { PORT: port });
    try {
      await submitting;
      const settled = await Promise.allSettled(submits);
      const rejected = settled.filter((result) => result.status === "rejected");
      expect(rejected.map((result) => String((result as PromiseRejectedResult).reason))).toEqual([]);
      // Some Sends met the shutdown, and none of them as INTERNAL.
      expect(failures.length).toBeGreaterThan(0);
      expect(failures.filter((code) => code !== Code.Unavailable)).toEqual([]);
      const taskIds = settled.map((result) => (result as PromiseFulfilledResult<{ taskId: string }>).value.taskId);
      expect(new Set(taskIds).size).toBe(60);
      for (const taskId of taskIds) expect((await client.getTask(taskId)).taskId).toBe(taskId);
    } finally {
      expect(await second.stop()).toBe(0);
    }
  }, 90_000);
});
