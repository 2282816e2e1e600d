/**
 * The generated messages, enums and service descriptor of A2A v1.0
 * (`lf.a2a.v1`, specification 1.0.1; protobuf-es, from the `.proto` file
 * shipped in the package's `proto/lf/a2a/v1/`), kept apart from
 * `synapse.v1` (whose `Task` and `TaskState` are other types). These are
 * what {@link "synapse-connect/client"!A2AClient | A2AClient} sends and answers.
 *
 * @example
 * ```ts
 * import { TaskState } from "synapse-connect/a2a-proto";
 *
 * if (task.status?.state === TaskState.INPUT_REQUIRED) await agent.reply(task, ["Oslo"]);
 * ```
 *
 * @packageDocumentation
 * @module synapse-connect/a2a-proto
 */
export * from "../../gen/lf/a2a/v1/a2a_pb.js";
