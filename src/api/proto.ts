/**
 * The generated messages, enums and service descriptors of `synapse.v1`
 * (protobuf-es, from the `.proto` files shipped in the package's `proto/`
 * directory). Each message `Foo` has a type `Foo` and a schema `FooSchema`
 * to use with `create`, `toBinary`, `fromJson` and friends of
 * `@bufbuild/protobuf`; services are descriptors for `createClient` and
 * `router.service` of connect-es.
 *
 * @example
 * ```ts
 * import { create, toJsonString } from "@bufbuild/protobuf";
 * import { TaskCancelPayloadSchema, P2PService } from "synapse-connect/proto";
 *
 * const cancel = create(TaskCancelPayloadSchema, { taskId: "t-1", reason: "not needed" });
 * console.log(toJsonString(TaskCancelPayloadSchema, cancel), P2PService.typeName);
 * ```
 *
 * @packageDocumentation
 * @module synapse-connect/proto
 */
export * from "../../gen/synapse/v1/a2n_pb.js";
export * from "../../gen/synapse/v1/capabilities_pb.js";
export * from "../../gen/synapse/v1/confidential_pb.js";
export * from "../../gen/synapse/v1/envelope_pb.js";
export * from "../../gen/synapse/v1/errors_pb.js";
export * from "../../gen/synapse/v1/group_pb.js";
export * from "../../gen/synapse/v1/p2p_pb.js";
export * from "../../gen/synapse/v1/payloads_pb.js";
export * from "../../gen/synapse/v1/registry_pb.js";
