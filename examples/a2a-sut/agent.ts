// The agent the A2A conformance kit (a2aproject/a2a-tck) expects, built on
// the public server API only: the kit names what it wants done in the
// prefix of each message's messageId, and this handler does it. Serves
// every A2A binding on 127.0.0.1 in open mode (the kit sends no tokens).
//
//   npm run a2a:sut -- --port 9999
import { parseArgs } from "node:util";
import { serveAgent, type TaskContext, type TaskOutput, type TaskTypeHandler } from "../../src/api/server.js";
import { ErrorCode } from "../../src/api/proto.js";

const { values } = parseArgs({ options: { port: { type: "string", default: "9999" }, host: { type: "string", default: "127.0.0.1" } } });

/** How long the resubscription scenario keeps its task working (twice the kit's stream wait). */
const RESUBSCRIBE_WORK_MS = 4000;
/** How long a message the kit names no behaviour for keeps its task working. */
const DEFAULT_WORK_MS = 1500;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

async function run(task: TaskContext): Promise<TaskOutput> {
  const id = task.requestMessageId;
  if (id.startsWith("test-resubscribe-message-id")) {
    await task.progress(10, "working");
    await sleep(RESUBSCRIBE_WORK_MS, task.signal);
    return { summary: "done" };
  }
  if (id.startsWith("tck-input-required")) {
    const answer = await task.askForInfo([{ field: "text", reason: "the kit's answer" }], "input required");
    return { output: answer, summary: "thanks" };
  }
  if (id.startsWith("tck-complete-task")) return { output: { text: "Hello from TCK" }, summary: "Hello from TCK" };
  if (id.startsWith("tck-message-response")) return { summary: "Direct message response", directReply: true };
  // Named outputs: the longest prefix first (tck-artifact-file-url before tck-artifact-file).
  const text = (value: string): TaskOutput => ({ summary: "completed", artifacts: [{ name: "output", parts: [{ text: value }] }] });
  if (id.startsWith("tck-artifact-file-url")) return { summary: "completed", artifacts: [{ name: "output", parts: [{ url: "https://example.com/output.txt", fileName: "output.txt", mediaType: "text/plain" }] }] };
  if (id.startsWith("tck-artifact-file") || id.startsWith("tck-stream-artifact-file")) {
    return { summary: "completed", artifacts: [{ name: "output", parts: [{ bytes: new TextEncoder().encode("tck"), fileName: "output.txt", mediaType: "text/plain" }] }] };
  }
  if (id.startsWith("tck-artifact-data")) return { summary: "completed", artifacts: [{ name: "output", parts: [{ data: { key: "value", count: 42 } }] }] };
  if (id.startsWith("tck-artifact-text")) return text("Generated text content");
  if (id.startsWith("tck-stream-002")) return { summary: "completed" };
  const streamed: Array<[string, string]> = [
    ["tck-stream-001", "Stream hello from TCK"],
    ["tck-stream-003", "Stream task lifecycle"],
    ["tck-stream-ordering-001", "Ordered output"],
    ["tck-stream-artifact-text", "Streamed text content"],
    ["tck-stream-artifact-chunked", "chunk-1 chunk-2"],
  ];
  for (const [prefix, value] of streamed) {
    if (id.startsWith(prefix)) {
      await task.progress(50, "working");
      return text(value);
    }
  }
  // Any other message: a task that works for a while (long enough to be seen working, listed and
  // cancelled), then answers with a text artifact.
  await task.progress(50, "working");
  await sleep(DEFAULT_WORK_MS, task.signal);
  return { summary: "completed", artifacts: [{ name: "response", parts: [{ text: `Hello World! Unhandled messageId prefix: ${id}` }] }] };
}

const tck: TaskTypeHandler = {
  name: "TCK Conformance",
  description: "Does what the conformance kit's messageId prefix asks",
  validateTask: (task) => (task.requestMessageId.startsWith("tck-reject-task") ? { kind: "reject", code: ErrorCode.INVALID_PARAMS, message: "rejected" } : { kind: "accept" }),
  executeTask: run,
};

const server = await serveAgent({ handlers: { tck }, store: "memory", host: values.host, port: Number(values.port), a2a: { open: true, bindings: ["JSONRPC", "HTTP+JSON", "GRPC"] } });
process.stdout.write(`a2a-sut listening on ${server.url}\n`);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void server.close());
