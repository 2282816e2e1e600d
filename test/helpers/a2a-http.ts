// A real server on port 0 serving the A2A bindings onto a fake service, and
// the plain HTTP calls the binding tests make (HTTP/1.1 through fetch,
// HTTP/2 through node:http2), with an SSE frame reader.
import http2 from "node:http2";
import { defaultAgentCapabilities } from "../../src/capabilities/defaults.js";
import { startServer, type RunningServer } from "../../src/server/server.js";
import { fakeA2A, type FakeA2A } from "./a2a-fake.js";

export interface FakeA2AServer extends RunningServer {
  fake: FakeA2A;
}

export async function startFakeA2AServer(options: { maxFileSize?: number; sseHeartbeatMs?: number } = {}): Promise<FakeA2AServer> {
  const fake = fakeA2A();
  const server = await startServer({
    capabilities: defaultAgentCapabilities({ agentId: "fake-a2a", maxFileSize: BigInt(options.maxFileSize ?? 1024 * 1024) }),
    port: 0,
    sseHeartbeatMs: options.sseHeartbeatMs,
    a2aService: () => fake.service,
  });
  return Object.assign(server, { fake });
}

export const V1 = { "A2A-Version": "1.0" } as const;

export interface SseFrame {
  id?: string;
  event?: string;
  data: string;
  comment?: string;
}

/** SSE frames of a body, comments kept (as frames with only a comment). */
export function sseFrames(text: string): SseFrame[] {
  const frames: SseFrame[] = [];
  for (const block of text.split("\n\n")) {
    if (block.trim() === "") continue;
    const frame: SseFrame = { data: "" };
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) frame.comment = line.slice(1).trim();
      else if (line.startsWith("id: ")) frame.id = line.slice(4);
      else if (line.startsWith("event: ")) frame.event = line.slice(7);
      else if (line.startsWith("data: ")) frame.data += line.slice(6);
    }
    frames.push(frame);
  }
  return frames;
}

export interface H2Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: string;
}

/** One request over HTTP/2 (prior knowledge, h2c), its whole answer. */
export function h2Request(baseUrl: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<H2Answer> {
  const session = http2.connect(baseUrl);
  return new Promise<H2Answer>((resolve, reject) => {
    session.on("error", reject);
    const stream = session.request({ ":method": method, ":path": path, ...headers });
    let answer: http2.IncomingHttpHeaders = {};
    let text = "";
    stream.setEncoding("utf8");
    stream.on("response", (h) => (answer = h));
    stream.on("data", (chunk: string) => (text += chunk));
    stream.on("end", () => {
      session.close();
      resolve({ status: Number(answer[":status"]), headers: answer, body: text });
    });
    stream.on("error", reject);
    stream.end(body);
  });
}

/** Reads an SSE response until `enough` says so (or it ends), then cancels it. */
export async function readFramesUntil(response: Response, enough: (frames: SseFrame[]) => boolean): Promise<SseFrame[]> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += value;
      if (enough(sseFrames(text.slice(0, text.lastIndexOf("\n\n") + 2)))) break;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return sseFrames(text.slice(0, text.lastIndexOf("\n\n") + 2));
}
