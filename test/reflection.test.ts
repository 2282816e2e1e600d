// gRPC server reflection (v1 and v1alpha) against a real server over gRPC/h2c:
// service lists, files by name and by symbol with their transitive
// dependencies, errors that leave the stream open.
import { create, createFileRegistry, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as v1 from "../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../gen/grpc/reflection/v1alpha/reflection_pb.js";
import type { RunningServer } from "../src/server/server.js";
import { startTestServer } from "./helpers/server.js";

/** The services the server serves today (others may be added later). */
const ALL_SERVICES = [
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
  "synapse.v1.CapabilitiesService",
  "synapse.v1.P2PService",
];

/** An async iterable whose items are pushed one at a time, to drive a bidi stream request by request. */
class Channel<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #wake: (() => void) | undefined;
  #closed = false;
  push(item: T): void {
    this.#items.push(item);
    this.#wake?.();
  }
  close(): void {
    this.#closed = true;
    this.#wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) yield item;
      else if (this.#closed) return;
      else await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }
}

type Request = MessageInitShape<typeof v1.ServerReflectionRequestSchema>;

/** One open v1 reflection stream: each ask sends a request and reads its response. */
function openStream(baseUrl: string) {
  const requests = new Channel<Request>();
  const client = createClient(v1.ServerReflection, createGrpcTransport({ baseUrl }));
  const responses = client.serverReflectionInfo(requests)[Symbol.asyncIterator]();
  return {
    async ask(request: Request): Promise<v1.ServerReflectionResponse> {
      requests.push(request);
      const next = await responses.next();
      if (next.done) throw new Error("the reflection stream ended");
      return next.value;
    },
    async end(): Promise<void> {
      requests.close();
      expect((await responses.next()).done).toBe(true);
    },
  };
}

function files(response: v1.ServerReflectionResponse | v1alpha.ServerReflectionResponse): FileDescriptorProto[] {
  if (response.messageResponse.case !== "fileDescriptorResponse") throw new Error(`not a file answer: ${response.messageResponse.case}`);
  return response.messageResponse.value.fileDescriptorProto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes));
}

/** Each file after the files it imports. */
function dependencyOrder(protos: FileDescriptorProto[]): FileDescriptorProto[] {
  const byName = new Map(protos.map((f) => [f.name, f]));
  const ordered: FileDescriptorProto[] = [];
  const visit = (f: FileDescriptorProto | undefined) => {
    if (f === undefined || ordered.includes(f)) return;
    f.dependency.forEach((name) => visit(byName.get(name)));
    ordered.push(f);
  };
  protos.forEach(visit);
  return ordered;
}

describe("server reflection", () => {
  let server: RunningServer;
  let stream: ReturnType<typeof openStream>;
  beforeAll(async () => {
    server = await startTestServer();
    stream = openStream(server.url);
  });
  afterAll(async () => {
    await stream.end();
    await server.close();
  });

  it("lists every service, reflection and health included, echoing the request", async () => {
    const response = await stream.ask({ host: "example", messageRequest: { case: "listServices", value: "*" } });
    expect(response.validHost).toBe("example");
    expect(response.originalRequest?.messageRequest).toEqual({ case: "listServices", value: "*" });
    expect(response.messageResponse.case).toBe("listServicesResponse");
    if (response.messageResponse.case !== "listServicesResponse") return;
    const names = response.messageResponse.value.service.map((s) => s.name);
    expect(names).toEqual(expect.arrayContaining(ALL_SERVICES));
    expect(names).toEqual([...new Set(names)].sort());
  });

  it("answers a file by name with all its transitive dependencies, each once, loadable into a fresh registry", async () => {
    const answer = files(await stream.ask({ messageRequest: { case: "fileByFilename", value: "synapse/v1/p2p.proto" } }));
    const names = answer.map((f) => f.name);
    expect(names[0]).toBe("synapse/v1/p2p.proto");
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(
      expect.arrayContaining([
        "google/protobuf/duration.proto",
        "google/protobuf/struct.proto",
        "google/protobuf/timestamp.proto",
        "synapse/v1/capabilities.proto",
        "synapse/v1/envelope.proto",
        "synapse/v1/errors.proto",
        "synapse/v1/payloads.proto",
      ]),
    );
    // Closed under imports: every file any returned file imports is returned too.
    for (const f of answer) for (const dep of f.dependency) expect(names).toContain(dep);
    // As a client would: load the answer into a fresh registry. (A FileDescriptorSet in
    // dependency order: createFileRegistry's resolver form mis-orders diamond imports.)
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: dependencyOrder(answer) }));
    const p2p = registry.getService("synapse.v1.P2PService");
    expect(p2p?.methods.map((m) => m.name)).toEqual(["Send", "Watch", "GetTask", "ListTasks", "ReadResult"]);
    expect(p2p?.methods[0]?.input.field.envelope?.message?.typeName).toBe("synapse.v1.Envelope");
    expect(registry.getMessage("google.protobuf.Duration")).toBeDefined();
  });

  const symbols: Array<[string, string]> = [
    ["synapse.v1.P2PService", "synapse/v1/p2p.proto"],
    ["synapse.v1.P2PService.Send", "synapse/v1/p2p.proto"],
    ["synapse.v1.CapabilitiesService", "synapse/v1/capabilities.proto"],
    ["synapse.v1.Header", "synapse/v1/envelope.proto"],
    ["synapse.v1.Header.sender", "synapse/v1/envelope.proto"],
    ["synapse.v1.MessageType", "synapse/v1/envelope.proto"],
    ["synapse.v1.MESSAGE_TYPE_TASK_REQUEST", "synapse/v1/envelope.proto"],
    ["synapse.v1.TaskState", "synapse/v1/payloads.proto"],
    ["grpc.health.v1.HealthCheckResponse.ServingStatus", "grpc/health/v1/health.proto"],
    ["grpc.reflection.v1.ServerReflection.ServerReflectionInfo", "grpc/reflection/v1/reflection.proto"],
    ["google.protobuf.Timestamp", "google/protobuf/timestamp.proto"],
    ["google.protobuf.Struct.FieldsEntry", "google/protobuf/struct.proto"],
  ];
  for (const [symbol, file] of symbols) {
    it(`finds the file containing ${symbol}`, async () => {
      const answer = files(await stream.ask({ messageRequest: { case: "fileContainingSymbol", value: symbol } }));
      expect(answer[0]?.name).toBe(file);
      const names = answer.map((f) => f.name);
      expect(new Set(names).size).toBe(names.length);
      for (const f of answer) for (const dep of f.dependency) expect(names).toContain(dep);
    });
  }

  it("sends synapse/v1/p2p.proto with envelope, payloads and the well-known types for P2PService.Send", async () => {
    const names = files(await stream.ask({ messageRequest: { case: "fileContainingSymbol", value: "synapse.v1.P2PService.Send" } })).map((f) => f.name);
    expect(names).toEqual(
      expect.arrayContaining([
        "synapse/v1/envelope.proto",
        "synapse/v1/payloads.proto",
        "google/protobuf/duration.proto",
        "google/protobuf/timestamp.proto",
        "google/protobuf/struct.proto",
      ]),
    );
  });

  it("answers unknown names with NOT_FOUND and keeps answering on the same stream", async () => {
    for (const messageRequest of [
      { case: "fileContainingSymbol", value: "synapse.v1.NoSuchThing" },
      { case: "fileByFilename", value: "synapse/v1/missing.proto" },
      { case: "allExtensionNumbersOfType", value: "synapse.v1.NoSuchMessage" },
      { case: "fileContainingExtension", value: { containingType: "synapse.v1.Envelope", extensionNumber: 100 } },
    ] as const) {
      const response = await stream.ask({ messageRequest });
      expect(response.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: 5 } });
    }
    const next = await stream.ask({ messageRequest: { case: "listServices", value: "" } });
    expect(next.messageResponse.case).toBe("listServicesResponse");
  });

  it("reports no extension numbers for a known message", async () => {
    const response = await stream.ask({ messageRequest: { case: "allExtensionNumbersOfType", value: "synapse.v1.Envelope" } });
    expect(response.messageResponse).toMatchObject({
      case: "allExtensionNumbersResponse",
      value: { baseTypeName: "synapse.v1.Envelope", extensionNumber: [] },
    });
  });

  it("answers v1alpha too", async () => {
    const client = createClient(v1alpha.ServerReflection, createGrpcTransport({ baseUrl: server.url }));
    const requests = [
      create(v1alpha.ServerReflectionRequestSchema, { messageRequest: { case: "listServices", value: "" } }),
      create(v1alpha.ServerReflectionRequestSchema, { messageRequest: { case: "fileContainingSymbol", value: "synapse.v1.CapabilitiesService" } }),
      create(v1alpha.ServerReflectionRequestSchema, { messageRequest: { case: "fileContainingSymbol", value: "nope" } }),
    ];
    const responses: v1alpha.ServerReflectionResponse[] = [];
    for await (const response of client.serverReflectionInfo((async function* () { yield* requests; })())) responses.push(response);
    expect(responses).toHaveLength(3);
    const [list, symbol, missing] = responses;
    expect(list?.messageResponse.case === "listServicesResponse" && list.messageResponse.value.service.map((s) => s.name)).toEqual(
      expect.arrayContaining(ALL_SERVICES),
    );
    const names = files(symbol!).map((f) => f.name);
    expect(names[0]).toBe("synapse/v1/capabilities.proto");
    expect(names).toEqual(expect.arrayContaining(["synapse/v1/envelope.proto", "google/protobuf/struct.proto"]));
    expect(missing?.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: 5 } });
  });
});
