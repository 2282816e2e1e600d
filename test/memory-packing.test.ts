// The memory store packs a finished task into bytes once newer ones have
// finished: nothing a reader sees changes. Watch streams (binary and
// JSON), GetTask and a re-delivered request get the same signed bytes and
// the same views after packing as before, and the signatures verify.
import { toBinary, toJson } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvelopeSchema } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { P2PService, SignedMessageSchema, TaskSchema, type SignedMessage } from "../gen/synapse/v1/p2p_pb.js";
import type { SynapseClient } from "../src/client/requester.js";
import { memoryStorage } from "../src/store/memory/index.js";
import { taskRequest } from "./helpers/requests.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

describe("finished tasks packed in the memory store", () => {
  let server: TestServer;
  let client: SynapseClient;
  let grpc: Transport;
  let json: Transport;
  beforeAll(async () => {
    // Only the newest finished task stays as objects: the one before it is packed.
    server = await startTestServer({ storage: memoryStorage(undefined, { keepFinished: 1 }) });
    client = await connectClient(server);
    grpc = createGrpcTransport({ baseUrl: server.url });
    json = createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: false });
  });
  afterAll(() => server.close());

  const headers = async () => ({ authorization: `Bearer ${await client.token(60)}` });
  const events = async (transport: Transport, taskId: string): Promise<SignedMessage[]> => {
    const out: SignedMessage[] = [];
    for await (const item of createClient(P2PService, transport).watch({ taskId }, { headers: await headers() })) {
      if (item.kind.case === "event") out.push(item.kind.value.message!);
    }
    return out;
  };
  /** What a reader can see of a task: its events and its view, in binary and in JSON. */
  const observe = async (taskId: string) => {
    const task = async (transport: Transport) => (await createClient(P2PService, transport).getTask({ taskId }, { headers: await headers() })).task!;
    return {
      binary: await events(grpc, taskId),
      json: await events(json, taskId),
      taskBinary: toBinary(TaskSchema, await task(grpc)),
      taskJson: toJson(TaskSchema, await task(json)),
    };
  };
  const envelopeBytes = (messages: SignedMessage[]) => messages.map((message) => Buffer.from(toBinary(EnvelopeSchema, message.envelope!)));

  it("serves a packed task's events, view and remembered reply exactly as before it was packed", async () => {
    const send = createClient(P2PService, grpc);
    const request = client.envelope(...taskRequest("first", "Packed later. Read the same."));
    const sent = await send.send({ envelope: request, wait: { seconds: 5n } });
    expect(sent.task?.state).toBe(TaskState.COMPLETED);
    const before = await observe("first");
    expect(before.binary.length).toBeGreaterThanOrEqual(2);

    // Another task finishes: "first" is packed now.
    await client.submit("text_analysis", { text: "Second." }, { waitMs: 5000 });
    const after = await observe("first");

    expect(envelopeBytes(after.binary)).toEqual(envelopeBytes(before.binary));
    expect(envelopeBytes(after.json)).toEqual(envelopeBytes(before.binary));
    expect(after.json.map((message) => toJson(SignedMessageSchema, message))).toEqual(before.json.map((message) => toJson(SignedMessageSchema, message)));
    expect(Buffer.from(after.taskBinary)).toEqual(Buffer.from(before.taskBinary));
    expect(after.taskJson).toEqual(before.taskJson);
    for (const message of after.binary) await client.verify(message.envelope!, { record: true });

    // The same request again: the first reply, as it was signed.
    const again = await send.send({ envelope: request });
    expect(Buffer.from(toBinary(SignedMessageSchema, again.reply!))).toEqual(Buffer.from(toBinary(SignedMessageSchema, sent.reply!)));
    expect(Buffer.from(toBinary(EnvelopeSchema, again.reply!.envelope!))).toEqual(envelopeBytes(before.binary)[0]);
  });
});
