// gRPC server reflection (grpc.reflection.v1 and v1alpha) over protobuf-es's
// registry: lists the services on the router and answers with serialized
// FileDescriptorProtos, each file with all its transitive dependencies.
import { create, createFileRegistry, toBinary, type DescFile, type DescMessage, type DescService, type FileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type DescriptorProto, type EnumDescriptorProto } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import * as v1 from "../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

type ReflectionRequest = v1.ServerReflectionRequest | v1alpha.ServerReflectionRequest;

/** A message_response, without the $typeName, so it fits v1 and v1alpha alike. */
export type ReflectionAnswer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: Array<{ name: string }> } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

function errorAnswer(code: Code, message: string): ReflectionAnswer {
  return { case: "errorResponse", value: { errorCode: code, errorMessage: message } };
}

/** What reflection knows: the files of the given services, their dependencies, and every name declared in them. */
export class ReflectionIndex {
  readonly registry: FileRegistry;
  readonly serviceNames: string[];
  /** Fully-qualified name of every service, method, message, field, oneof, enum, enum value and extension, to its file. */
  readonly #symbols = new Map<string, DescFile>();
  readonly #serialized = new Map<DescFile, Uint8Array>();

  constructor(services: Iterable<DescService>) {
    const list = [...services];
    this.serviceNames = [...new Set(list.map((service) => service.typeName))].sort();
    const files = [...new Set(list.map((service) => service.file))];
    // One registry per served file, its imports resolved from the file's own dependencies, merged into one.
    this.registry = createFileRegistry(
      ...files.map((file) => createFileRegistry(file.proto, (name) => file.dependencies.find((dep) => dep.proto.name === name))),
    );
    for (const file of this.registry.files) this.#indexFile(file);
  }

  answer(request: ReflectionRequest): ReflectionAnswer {
    const message = request.messageRequest;
    switch (message.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: this.serviceNames.map((name) => ({ name })) } };
      case "fileByFilename": {
        const file = this.registry.getFile(message.value);
        return file ? this.#filesAnswer(file) : errorAnswer(Code.NotFound, `file not found: ${message.value}`);
      }
      case "fileContainingSymbol": {
        const file = this.#symbols.get(message.value.replace(/^\./, ""));
        return file ? this.#filesAnswer(file) : errorAnswer(Code.NotFound, `symbol not found: ${message.value}`);
      }
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = message.value;
        const extendee = this.registry.getMessage(containingType);
        if (extendee === undefined) return errorAnswer(Code.NotFound, `message type not found: ${containingType}`);
        const extension = this.registry.getExtensionFor(extendee, extensionNumber);
        return extension
          ? this.#filesAnswer(extension.file)
          : errorAnswer(Code.NotFound, `extension not found: ${containingType} ${extensionNumber}`);
      }
      case "allExtensionNumbersOfType": {
        const extendee = this.registry.getMessage(message.value);
        if (extendee === undefined) return errorAnswer(Code.NotFound, `message type not found: ${message.value}`);
        return { case: "allExtensionNumbersResponse", value: { baseTypeName: extendee.typeName, extensionNumber: this.#extensionNumbers(extendee) } };
      }
      default:
        return errorAnswer(Code.InvalidArgument, "the request sets no message_request");
    }
  }

  /** The file first (clients read the first one as the answer), then its transitive dependencies, each once. */
  #filesAnswer(file: DescFile): ReflectionAnswer {
    const seen = new Set<string>();
    const out: Uint8Array[] = [];
    const visit = (f: DescFile) => {
      if (seen.has(f.proto.name)) return;
      seen.add(f.proto.name);
      out.push(this.#bytes(f));
      f.dependencies.forEach(visit);
    };
    visit(file);
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } };
  }

  #bytes(file: DescFile): Uint8Array {
    let bytes = this.#serialized.get(file);
    if (bytes === undefined) {
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      this.#serialized.set(file, bytes);
    }
    return bytes;
  }

  #extensionNumbers(extendee: DescMessage): number[] {
    const numbers: number[] = [];
    for (const type of this.registry) {
      if (type.kind === "extension" && type.extendee.typeName === extendee.typeName) numbers.push(type.number);
    }
    return numbers.sort((a, b) => a - b);
  }

  /** Walks the FileDescriptorProto rather than the Desc tree, so map entry messages are found too. */
  #indexFile(file: DescFile): void {
    const add = (scope: string, name: string) => {
      const full = scope ? `${scope}.${name}` : name;
      this.#symbols.set(full, file);
      return full;
    };
    const addEnums = (scope: string, enums: EnumDescriptorProto[]) => {
      for (const e of enums) {
        add(scope, e.name);
        // Enum values are scoped beside their enum, as in C++.
        for (const value of e.value) add(scope, value.name);
      }
    };
    const addMessages = (scope: string, messages: DescriptorProto[]) => {
      for (const message of messages) {
        const name = add(scope, message.name);
        for (const member of [...message.field, ...message.oneofDecl, ...message.extension]) add(name, member.name);
        addEnums(name, message.enumType);
        addMessages(name, message.nestedType);
      }
    };
    const { proto } = file;
    addMessages(proto.package, proto.messageType);
    addEnums(proto.package, proto.enumType);
    for (const extension of proto.extension) add(proto.package, extension.name);
    for (const service of proto.service) {
      const name = add(proto.package, service.name);
      for (const method of service.method) add(name, method.name);
    }
  }
}

/**
 * Registers ServerReflection v1 and v1alpha on the router. They describe every
 * service on the router, themselves included; the list is read at the first
 * reflection request, so services registered after this call count too.
 */
export function registerReflection(router: ConnectRouter): void {
  let index: ReflectionIndex | undefined;
  const answer = (request: ReflectionRequest) => (index ??= new ReflectionIndex(router.handlers.map((h) => h.service))).answer(request);
  router.service(v1.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        yield create(v1.ServerReflectionResponseSchema, { validHost: request.host, originalRequest: request, messageResponse: answer(request) });
      }
    },
  });
  router.service(v1alpha.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        yield create(v1alpha.ServerReflectionResponseSchema, { validHost: request.host, originalRequest: request, messageResponse: answer(request) });
      }
    },
  });
}
