// Signed messages are encoded once: binary replies and Watch events carry
// the envelope and its view built from the envelope's own bytes. Whatever
// the protocol, a reader gets the same envelope bytes and an equal view.
import { equals, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvelopeSchema, HeaderSchema } from "../gen/synapse/v1/envelope_pb.js";
import { EnvelopeViewSchema, P2PService, type SignedMessage } from "../gen/synapse/v1/p2p_pb.js";
import { issueToken } from "../src/crypto/tokens.js";
import { decodeUnverified } from "../src/envelope/view.js";
import { connectClient, requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

describe("signed messages on the wire", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  /** The view a JSON reader would be given for this envelope. */
  const viewOf = (message: SignedMessage) => {
    const { header, payload } = decodeUnverified(message.envelope!);
    expect(equals(HeaderSchema, message.view!.header!, header)).toBe(true);
    expect(message.view!.payload!.body.value).toEqual(payload);
    return toJson(EnvelopeViewSchema, message.view!);
  };

  it("gives the same envelope and an equal view over gRPC (binary) and Connect JSON", async () => {
    const identity = await requesterIdentity();
    const client = await connectClient(server, { identity });
    const { taskId } = await client.submit("text_analysis", { text: "Bytes. Once." }, { waitMs: 5000 });
    const token = await issueToken(identity.key, { agentId: identity.agentId, audience: server.agent.identity.agentId });
    const headers = { authorization: `Bearer ${token}` };
    const collect = async (transport: Parameters<typeof createClient>[1]) => {
      const events: SignedMessage[] = [];
      for await (const item of createClient(P2PService, transport).watch({ taskId }, { headers })) if (item.kind.case === "event") events.push(item.kind.value.message!);
      return events;
    };
    const binary = await collect(createGrpcTransport({ baseUrl: server.url }));
    const json = await collect(createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: false }));
    expect(binary.length).toBeGreaterThanOrEqual(2);
    expect(binary.length).toBe(json.length);
    binary.forEach((message, i) => {
      expect(Buffer.from(toBinary(EnvelopeSchema, message.envelope!))).toEqual(Buffer.from(toBinary(EnvelopeSchema, json[i]!.envelope!)));
      expect(viewOf(message)).toEqual(viewOf(json[i]!));
    });
    // The view's header is the very bytes that were signed.
    expect(Buffer.from(toBinary(HeaderSchema, binary[0]!.view!.header!))).toEqual(Buffer.from(binary[0]!.envelope!.header));
    expect(fromBinary(HeaderSchema, binary[0]!.envelope!.header).taskId).toBe(taskId);
  });

  it("answers Send in binary with the reply built from its envelope, and without echoing the request", async () => {
    const client = await connectClient(server);
    const envelope = client.envelope(...(await import("./helpers/requests.js")).taskRequest("t-wire"));
    const sent = await createClient(P2PService, createGrpcTransport({ baseUrl: server.url })).send({ envelope });
    expect(sent.task?.taskId).toBe("t-wire");
    expect(sent.task?.request).toBeUndefined();
    viewOf(sent.reply!);
    await client.verify(sent.reply!.envelope!);
  });
});
