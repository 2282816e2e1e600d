// A handler's named artifacts, direct-reply mark and request message id, as
// the Synapse face sees them over a real socket: the artifacts are in the
// signed result's metadata (A2A's Part JSON), an empty one fails the task.
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SupportedTaskTypeSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { TaskHandler } from "../src/agent/handler.js";
import type { SynapseClient } from "../src/client/requester.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

const files: TaskHandler = {
  async executeTask(task) {
    if (task.payload.empty === true) return { artifacts: [{ parts: [] }] };
    return {
      summary: "made",
      directReply: true,
      output: { requestMessageId: task.requestMessageId },
      artifacts: [
        { name: "report", parts: [{ text: "hello" }, { bytes: new Uint8Array([1, 2, 3]), fileName: "r.bin", mediaType: "application/octet-stream" }] },
        { artifactId: "link", parts: [{ url: "https://example.com/x", mediaType: "text/plain" }, { data: { n: 1 } }] },
      ],
    };
  },
};

let server: TestServer;
let client: SynapseClient;

beforeAll(async () => {
  server = await startTestServer({
    capabilities: { supportedTaskTypes: [create(SupportedTaskTypeSchema, { type: "files", name: "files" })] },
    handlers: new Map([["files", files]]),
  });
  client = await connectClient(server);
});
afterAll(async () => {
  await server?.close();
});

describe("result artifacts", () => {
  it("keeps the artifacts and the direct-reply mark in the signed result, and shows the handler the request's message id", async () => {
    const { taskId } = await client.submit("files", {}, { waitMs: 5_000 });
    const task = await client.getTask(taskId);
    expect(task.state).toBe(TaskState.COMPLETED);
    const result = task.result!;
    expect(result.metadata?.directReply).toBe(true);
    expect(result.metadata?.artifacts).toEqual([
      { artifactId: `${taskId}-artifact-1`, name: "report", parts: [{ text: "hello" }, { raw: "AQID", filename: "r.bin", mediaType: "application/octet-stream" }] },
      { artifactId: "link", parts: [{ url: "https://example.com/x", mediaType: "text/plain" }, { data: { n: 1 } }] },
    ]);
    // A Synapse request's message id is its header's, which the client chose (not empty, not scoped).
    const seen = (result.output?.kind.case === "structValue" ? result.output.kind.value.fields.requestMessageId?.kind.value : undefined) as string | undefined;
    expect(seen).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("fails the task (output_invalid) when an artifact has no parts", async () => {
    const { taskId } = await client.submit("files", { empty: true }, { waitMs: 5_000 });
    const task = await client.getTask(taskId);
    expect(task.state).toBe(TaskState.FAILED);
    expect(task.error?.code).toBe(ErrorCode.OUTPUT_INVALID);
  });
});
