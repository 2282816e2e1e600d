// The A2A v1.0 contract in proto/lf/a2a/v1/a2a.proto against the two
// references it must match: the specification's own a2a.proto (release
// 1.0.1, compiled into contract/a2a-v1.0.1.binpb by scripts/a2a-spec-image.mjs)
// field by field, and the official JavaScript SDK (@a2a-js/sdk), whose own
// lf.a2a.v1 codecs must read what ours write and the reverse, in binary, in
// ProtoJSON and over a real gRPC socket.
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import * as sdk from "@a2a-js/sdk";
import { A2AService as SdkA2AService } from "@a2a-js/sdk/server/grpc";
import { clone, create, equals, fromBinary, fromJson, toBinary, toJson, type DescMessage, type JsonValue, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema, MethodOptionsSchema, timestampFromDate, ValueSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  A2AService,
  AgentCardSchema,
  file_lf_a2a_v1_a2a,
  ListTaskPushNotificationConfigsRequestSchema,
  ListTasksRequestSchema,
  ListTasksResponseSchema,
  Role,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  StreamResponseSchema,
  TaskPushNotificationConfigSchema,
  TaskSchema,
  TaskState,
  type Message,
  type Task,
} from "../gen/lf/a2a/v1/a2a_pb.js";

/**
 * A descriptor as JSON, ordered so that declaration order (which the wire
 * ignores) does not count. An RPC written with a body ("{ }", as the
 * specification's are once their http options are cut) and one written
 * with ";" differ only in an empty options message, so that is dropped too.
 */
function wireFacts(file: FileDescriptorProto): JsonValue {
  const proto = clone(FileDescriptorProtoSchema, file);
  proto.name = "";
  proto.sourceCodeInfo = undefined;
  for (const method of proto.service.flatMap((s) => s.method)) {
    if (method.options && toBinary(MethodOptionsSchema, method.options).length === 0) method.options = undefined;
  }
  const json = toJson(FileDescriptorProtoSchema, proto) as { messageType?: Array<{ name: string; field?: Array<{ number: number }> }>; enumType?: Array<{ name: string }> };
  json.messageType?.sort((a, b) => a.name.localeCompare(b.name));
  for (const message of json.messageType ?? []) message.field?.sort((a, b) => a.number - b.number);
  json.enumType?.sort((a, b) => a.name.localeCompare(b.name));
  return json as JsonValue;
}

describe("lf.a2a.v1 descriptor", () => {
  it("declares exactly the specification's messages, fields, enums, oneofs, options and RPCs", () => {
    const image = fromBinary(FileDescriptorSetSchema, readFileSync(new URL("../contract/a2a-v1.0.1.binpb", import.meta.url)));
    const spec = image.file.find((f) => f.name === "a2a.proto");
    expect(spec?.package).toBe("lf.a2a.v1");
    const ours = file_lf_a2a_v1_a2a.proto;
    expect(ours.name).toBe("lf/a2a/v1/a2a.proto");
    expect(wireFacts(ours)).toEqual(wireFacts(spec!));
    // The comparison above covers these; they are spelled out because clients dial them by name.
    expect(A2AService.typeName).toBe("lf.a2a.v1.A2AService");
    expect(A2AService.methods.map((m) => [m.name, m.methodKind])).toEqual([
      ["SendMessage", "unary"],
      ["SendStreamingMessage", "server_streaming"],
      ["GetTask", "unary"],
      ["ListTasks", "unary"],
      ["CancelTask", "unary"],
      ["SubscribeToTask", "server_streaming"],
      ["CreateTaskPushNotificationConfig", "unary"],
      ["GetTaskPushNotificationConfig", "unary"],
      ["ListTaskPushNotificationConfigs", "unary"],
      ["GetExtendedAgentCard", "unary"],
      ["DeleteTaskPushNotificationConfig", "unary"],
    ]);
  });
});

// --- The SDK's codecs -------------------------------------------------------

interface SdkCodec {
  serialize(value: unknown): Buffer;
  deserialize(bytes: Buffer): unknown;
  toJSON(value: unknown): unknown;
  fromJSON(json: unknown): unknown;
}
type SdkMethod = { path: string; requestStream: boolean; responseStream: boolean; requestSerialize(v: unknown): Buffer; requestDeserialize(b: Buffer): unknown; responseSerialize(v: unknown): Buffer; responseDeserialize(b: Buffer): unknown };
const sdkMethods = Object.values(SdkA2AService as unknown as Record<string, SdkMethod>);
type SdkJson = { toJSON(value: unknown): unknown; fromJSON(json: unknown): unknown };
const sdkJson = sdk as unknown as Record<string, SdkJson>;

function sdkCodec(rpc: string, side: "request" | "response", typeName: string): SdkCodec {
  const method = sdkMethods.find((m) => m.path === `/lf.a2a.v1.A2AService/${rpc}`);
  if (!method) throw new Error(`the SDK has no ${rpc}`);
  const json = sdkJson[typeName];
  if (!json) throw new Error(`the SDK exports no ${typeName}`);
  return side === "request"
    ? { serialize: (v) => method.requestSerialize(v), deserialize: (b) => method.requestDeserialize(b), toJSON: (v) => json.toJSON(v), fromJSON: (j) => json.fromJSON(j) }
    : { serialize: (v) => method.responseSerialize(v), deserialize: (b) => method.responseDeserialize(b), toJSON: (v) => json.toJSON(v), fromJSON: (j) => json.fromJSON(j) };
}

// --- Populated messages: every field kind, every oneof case ---------------

const at = (iso: string) => timestampFromDate(new Date(iso));
const json = (value: JsonValue) => fromJson(ValueSchema, value);

const userMessage: Message = create(SendMessageRequestSchema, {
  message: {
    messageId: "msg-1",
    contextId: "ctx-1",
    taskId: "task-1",
    role: Role.USER,
    parts: [
      { content: { case: "text", value: "summarise the attached report" }, mediaType: "text/plain" },
      { content: { case: "data", value: json({ rows: [1, "two", null, true], nested: { k: "v" } }) }, mediaType: "application/json", metadata: { source: "form" } },
      { content: { case: "data", value: json([1.5, -2]) } },
      { content: { case: "raw", value: new Uint8Array([0, 1, 2, 250, 255]) }, filename: "report.bin", mediaType: "application/octet-stream" },
      { content: { case: "url", value: "https://files.example/report.pdf" }, filename: "report.pdf", mediaType: "application/pdf" },
    ],
    metadata: { priority: 3, tags: ["a", "b"], nested: { ok: true } },
    extensions: ["https://example.org/ext/one"],
    referenceTaskIds: ["task-0"],
  },
}).message!;

const agentMessage: Message = { ...userMessage, messageId: "msg-2", role: Role.AGENT, parts: [{ $typeName: "lf.a2a.v1.Part", content: { case: "text", value: "which quarter?" }, filename: "", mediaType: "" }] };

const task: Task = create(TaskSchema, {
  id: "task-1",
  contextId: "ctx-1",
  status: { state: TaskState.INPUT_REQUIRED, message: agentMessage, timestamp: at("2026-05-26T10:00:00.250Z") },
  artifacts: [{ artifactId: "art-1", name: "summary", description: "the summary", parts: [{ content: { case: "text", value: "..." } }], metadata: { words: 120 }, extensions: ["https://example.org/ext/one"] }],
  history: [userMessage, agentMessage],
  metadata: { origin: "test" },
});

const sendRequest = create(SendMessageRequestSchema, {
    tenant: "tenant-a",
    message: userMessage,
    configuration: {
      acceptedOutputModes: ["text/plain", "application/json"],
      taskPushNotificationConfig: { url: "https://hooks.example/a2a", token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } },
      historyLength: 0,
      returnImmediately: true,
    },
    metadata: { trace: "abc" },
  });

const streamPayloads: Array<MessageInitShape<typeof StreamResponseSchema>["payload"]> = [
  { case: "task", value: task },
  { case: "message", value: agentMessage },
  { case: "statusUpdate", value: { taskId: "task-1", contextId: "ctx-1", status: { state: TaskState.WORKING, timestamp: at("2026-05-26T10:00:01Z") }, metadata: { step: 2 } } },
  {
    case: "artifactUpdate",
    value: { taskId: "task-1", contextId: "ctx-1", artifact: { artifactId: "art-1", parts: [{ content: { case: "text", value: "chunk" } }] }, append: true, lastChunk: true, metadata: { chunk: 3 } },
  },
];

interface Fixture {
  rpc: string;
  side: "request" | "response";
  sdkType: string;
  schema: DescMessage;
  value: MessageShape<DescMessage>;
}

const fixtures: Fixture[] = [
  {
    rpc: "SendMessage",
    side: "request",
    sdkType: "SendMessageRequest",
    schema: SendMessageRequestSchema,
    value: sendRequest,
  },
  { rpc: "SendMessage", side: "response", sdkType: "SendMessageResponse", schema: SendMessageResponseSchema, value: create(SendMessageResponseSchema, { payload: { case: "task", value: task } }) },
  { rpc: "SendMessage", side: "response", sdkType: "SendMessageResponse", schema: SendMessageResponseSchema, value: create(SendMessageResponseSchema, { payload: { case: "message", value: agentMessage } }) },
  ...streamPayloads.map((payload): Fixture => ({ rpc: "SendStreamingMessage", side: "response", sdkType: "StreamResponse", schema: StreamResponseSchema, value: create(StreamResponseSchema, { payload }) })),
  {
    rpc: "ListTasks",
    side: "request",
    sdkType: "ListTasksRequest",
    schema: ListTasksRequestSchema,
    value: create(ListTasksRequestSchema, { tenant: "t", contextId: "ctx-1", status: TaskState.COMPLETED, pageSize: 20, pageToken: "cursor", historyLength: 2, statusTimestampAfter: at("2026-05-01T00:00:00Z"), includeArtifacts: false }),
  },
  { rpc: "ListTasks", side: "response", sdkType: "ListTasksResponse", schema: ListTasksResponseSchema, value: create(ListTasksResponseSchema, { tasks: [task], nextPageToken: "next", pageSize: 20, totalSize: 41 }) },
  {
    rpc: "CreateTaskPushNotificationConfig",
    side: "request",
    sdkType: "TaskPushNotificationConfig",
    schema: TaskPushNotificationConfigSchema,
    value: create(TaskPushNotificationConfigSchema, { tenant: "t", id: "cfg-1", taskId: "task-1", url: "https://hooks.example/a2a", token: "tok", authentication: { scheme: "Basic", credentials: "dXNlcjpwdw==" } }),
  },
  {
    rpc: "ListTaskPushNotificationConfigs",
    side: "request",
    sdkType: "ListTaskPushNotificationConfigsRequest",
    schema: ListTaskPushNotificationConfigsRequestSchema,
    value: create(ListTaskPushNotificationConfigsRequestSchema, { tenant: "t", taskId: "task-1", pageSize: 5, pageToken: "p" }),
  },
  {
    rpc: "GetExtendedAgentCard",
    side: "response",
    sdkType: "AgentCard",
    schema: AgentCardSchema,
    value: create(AgentCardSchema, {
      name: "Summariser",
      description: "summarises reports",
      supportedInterfaces: [
        { url: "http://127.0.0.1:7000/a2a/jsonrpc", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: "http://127.0.0.1:7000", protocolBinding: "GRPC", protocolVersion: "1.0", tenant: "t" },
      ],
      provider: { url: "https://example.org", organization: "Example" },
      version: "0.1.0",
      documentationUrl: "https://example.org/docs",
      capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: true, extensions: [{ uri: "https://example.org/ext/one", description: "d", required: true, params: { level: 2 } }] },
      securitySchemes: {
        key: { scheme: { case: "apiKeySecurityScheme", value: { description: "d", location: "header", name: "X-Key" } } },
        bearer: { scheme: { case: "httpAuthSecurityScheme", value: { scheme: "Bearer", bearerFormat: "JWT" } } },
        oauth: {
          scheme: {
            case: "oauth2SecurityScheme",
            value: { flows: { flow: { case: "authorizationCode", value: { authorizationUrl: "https://a/auth", tokenUrl: "https://a/token", refreshUrl: "https://a/r", scopes: { read: "read tasks" }, pkceRequired: true } } }, oauth2MetadataUrl: "https://a/.well-known" },
          },
        },
        device: { scheme: { case: "oauth2SecurityScheme", value: { flows: { flow: { case: "deviceCode", value: { deviceAuthorizationUrl: "https://a/device", tokenUrl: "https://a/token", scopes: { write: "w" } } } } } } },
        machine: { scheme: { case: "oauth2SecurityScheme", value: { flows: { flow: { case: "clientCredentials", value: { tokenUrl: "https://a/token", scopes: {} } } } } } },
        oidc: { scheme: { case: "openIdConnectSecurityScheme", value: { openIdConnectUrl: "https://a/.well-known/openid-configuration" } } },
        mtls: { scheme: { case: "mtlsSecurityScheme", value: { description: "client certificate" } } },
      },
      securityRequirements: [{ schemes: { bearer: { list: [] }, oauth: { list: ["read"] } } }],
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain", "application/json"],
      skills: [{ id: "summarise", name: "Summarise", description: "d", tags: ["text"], examples: ["summarise this"], inputModes: ["application/pdf"], outputModes: ["text/plain"], securityRequirements: [{ schemes: { key: { list: [] } } }] }],
      signatures: [{ protected: "eyJhbGciOiJFZERTQSJ9", signature: "c2ln", header: { kid: "key-1" } }],
      iconUrl: "https://example.org/icon.png",
    }),
  },
];

describe("lf.a2a.v1 against @a2a-js/sdk", () => {
  it("serves the same eleven gRPC paths with the same streaming shapes", () => {
    const sdkPaths = sdkMethods.map((m) => [m.path, m.requestStream, m.responseStream]).sort();
    const ours = A2AService.methods.map((m) => [`/${A2AService.typeName}/${m.name}`, false, m.methodKind === "server_streaming"]).sort();
    expect(ours).toEqual(sdkPaths);
  });

  for (const fixture of fixtures) {
    const oneofCase = (fixture.value as { payload?: { case?: string } }).payload?.case;
    const label = `${fixture.rpc} ${fixture.side} ${fixture.sdkType}${oneofCase ? ` (${oneofCase})` : ""}`;
    const { schema, value } = fixture;
    const codec = sdkCodec(fixture.rpc, fixture.side, fixture.sdkType);

    it(`${label}: binary written by us, read and rewritten by the SDK, reads back unchanged`, () => {
      const bytes = toBinary(schema, value);
      const sdkValue = codec.deserialize(Buffer.from(bytes));
      expect(equals(schema, fromBinary(schema, codec.serialize(sdkValue)), value)).toBe(true);
      // The SDK keeps no unknown fields: what it understood, it understood under our field names.
      expect(equals(schema, fromJson(schema, codec.toJSON(sdkValue) as JsonValue), value)).toBe(true);
    });

    it(`${label}: our ProtoJSON parsed by the SDK, and the SDK's JSON parsed by us, are the same message`, () => {
      const ourJson = toJson(schema, value);
      const sdkValue = codec.fromJSON(ourJson);
      expect(equals(schema, fromBinary(schema, codec.serialize(sdkValue)), value)).toBe(true);
      expect(equals(schema, fromJson(schema, codec.toJSON(sdkValue) as JsonValue), value)).toBe(true);
    });
  }
});

describe("lf.a2a.v1 JSON shapes the JSON-RPC and HTTP+JSON bindings carry", () => {
  it("names oneof cases by their field, enums by their full value names, fields in lowerCamelCase", () => {
    const send = toJson(SendMessageRequestSchema, sendRequest) as { message: { role: string; parts: Array<Record<string, JsonValue>> }; configuration: Record<string, JsonValue> };
    expect(send.message.role).toBe("ROLE_USER");
    expect(send.message.parts.map((p) => Object.keys(p).filter((k) => ["text", "raw", "url", "data"].includes(k)))).toEqual([["text"], ["data"], ["data"], ["raw"], ["url"]]);
    expect(send.message.parts[1]?.data).toEqual({ rows: [1, "two", null, true], nested: { k: "v" } });
    expect(send.message.parts[2]?.data).toEqual([1.5, -2]);
    expect(send.message.parts[3]?.raw).toBe("AAEC+v8=");
    expect(send.configuration).toMatchObject({ acceptedOutputModes: ["text/plain", "application/json"], historyLength: 0, returnImmediately: true });
    const status = toJson(StreamResponseSchema, create(StreamResponseSchema, { payload: { case: "statusUpdate", value: { taskId: "t", contextId: "c", status: { state: TaskState.COMPLETED, timestamp: at("2026-05-26T10:00:00Z") } } } }));
    expect(status).toEqual({ statusUpdate: { taskId: "t", contextId: "c", status: { state: "TASK_STATE_COMPLETED", timestamp: "2026-05-26T10:00:00Z" } } });
  });
});

// --- Over a real socket ----------------------------------------------------

describe("lf.a2a.v1 over gRPC between our client and an @a2a-js/sdk server definition", () => {
  let server: grpc.Server;
  let url: string;
  const received: unknown[] = [];
  beforeAll(async () => {
    server = new grpc.Server();
    const sdkTask = sdk.Task.fromJSON(toJson(TaskSchema, task));
    server.addService(SdkA2AService as unknown as grpc.ServiceDefinition, {
      sendMessage: (call: grpc.ServerUnaryCall<unknown, unknown>, done: grpc.sendUnaryData<unknown>) => {
        received.push(call.request);
        done(null, { payload: { $case: "task", value: sdkTask } });
      },
      sendStreamingMessage: (call: grpc.ServerWritableStream<unknown, unknown>) => {
        received.push(call.request);
        call.write({ payload: { $case: "task", value: sdkTask } });
        call.write({ payload: { $case: "statusUpdate", value: { taskId: "task-1", contextId: "ctx-1", status: { state: sdk.TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: "2026-05-26T10:00:02.000Z" }, metadata: undefined } } });
        call.end();
      },
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(() => server.forceShutdown());

  it("SendMessage and SendStreamingMessage reach the SDK's handlers and come back intact", async () => {
    const client = createClient(A2AService, createGrpcTransport({ baseUrl: url }));
    const request = sendRequest;
    const answer = await client.sendMessage(request);
    expect(answer.payload.case).toBe("task");
    expect(equals(TaskSchema, answer.payload.value as Task, task)).toBe(true);
    const events = [];
    for await (const event of client.sendStreamingMessage(request)) events.push(event.payload);
    expect(events.map((e) => e.case)).toEqual(["task", "statusUpdate"]);
    expect(events[1]?.case === "statusUpdate" && events[1].value.status?.state).toBe(TaskState.COMPLETED);
    expect(received).toHaveLength(2);
    for (const sdkRequest of received) expect(equals(SendMessageRequestSchema, fromJson(SendMessageRequestSchema, sdk.SendMessageRequest.toJSON(sdkRequest as sdk.SendMessageRequest) as JsonValue), request)).toBe(true);
  });
});
