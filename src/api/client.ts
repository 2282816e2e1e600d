/**
 * The requester side: {@link SynapseClient} submits tasks to an agent,
 * watches them, reads their results, answers their questions and cancels
 * them. Every reply and event is verified against the key the agent
 * declared, and checked against the task state machine.
 * {@link uploadFile} uploads a file for a task to name, and
 * {@link GroupClient} is a member's or coordinator's side of a group of
 * agents (A2N) at its host. {@link A2AClient} calls any A2A v1.0 agent
 * (docs/A2A-CLIENT.md).
 *
 * @example
 * ```ts
 * import { createIdentity, stateName } from "synapse-connect";
 * import { SynapseClient, taskOutput } from "synapse-connect/client";
 *
 * const client = await SynapseClient.connect({ baseUrl: "http://127.0.0.1:8080", identity: createIdentity() });
 *
 * // Submit and wait: the reply is held until the task ends or needs an answer (at most 30 s).
 * const { task } = await client.submit("text_analysis", { text: "Agents talk." }, { waitMs: 30_000 });
 * console.log(stateName(task!.state), taskOutput(task!));
 *
 * // Submit and watch every signed event.
 * const { taskId } = await client.submit("text_analysis", { text: "They sign." });
 * for await (const item of client.watch(taskId)) {
 *   if (item.kind === "event") console.log(item.sequence, stateName(item.state));
 * }
 * ```
 *
 * @packageDocumentation
 * @module synapse-connect/client
 */
import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { HeaderSchema } from "../../gen/synapse/v1/envelope_pb.js";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import type { VerifiedMessage } from "../client/requester.js";
import { messageTypeInfo, wireName } from "../protocol/message-types.js";

export {
  SynapseClient,
  type ClientOptions,
  type SubmitOptions,
  type SendResult,
  type DecisionInput,
  type ClientWatchItem,
  type WatchOptions,
  type VerifiedMessage,
  type EnvelopeExtras,
} from "../client/requester.js";
export type { TransportOptions, ProtocolName } from "../client/transport.js";
export { uploadFile, type UploadAnswer, type UploadFileOptions } from "../client/upload.js";
export {
  GroupClient,
  type GroupClientOptions,
  type GroupSendResult,
  type GroupWatchItem,
  type GroupTaskInput,
  type VoteInput,
  type SubtaskAnswer,
  type BallotInput,
  type VerifiedGroupEvent,
} from "../client/group-client.js";
export {
  A2AClient,
  dataPart,
  toPart,
  taskIdOf,
  stateOf,
  isTerminalA2AState,
  isInterruptedA2AState,
  type A2AClientOptions,
  type A2AAuth,
  type MessageInput,
  type PartInput,
  type SendOptions as A2ASendOptions,
  type SendResult as A2ASendResult,
  type ListTasksFilter,
} from "../client/a2a/a2a-client.js";
export { readAgentCard, chooseInterface, cardUrlsFor, A2A_VERSION, type A2ABinding, type ReadCard, type ReadCardOptions } from "../client/a2a/card.js";
export { verifyCardSignatures, canonicalCardPayload, canonicalJson, type CardKey, type CardKeyResolver, type CardVerdict, type VerifyCardOptions } from "../client/a2a/card-signature.js";
export { A2AClientError, type A2AErrorKind } from "../client/a2a/errors.js";
export type { A2ASpecErrorKind } from "../protocol/a2a-error-kinds.js";
export { taskView } from "../client/a2a/task-view.js";
export type { CallbackInbox, InboxEvent, ExpectedExecutor } from "../agent/inbox.js";
export type { StoredEvent } from "../store/store.js";
export type { Task } from "../../gen/synapse/v1/p2p_pb.js";

/**
 * A completed task's output as JSON (`Task.result.output`), or undefined
 * when the task has none (not completed, or its result is only a stream:
 * read that with `SynapseClient.readResult`).
 */
export function taskOutput(task: Task): JsonValue | undefined {
  const output = task.result?.output;
  return output === undefined ? undefined : toJson(ValueSchema, output);
}

/** A verified message as JSON: its protocol type, header and payload, for logs and display. */
export interface MessageJson {
  /** The protocol spelling of the message type, for example `"p2p:task_status_update"`. */
  type: string;
  /** The signed header (ids, times, sequence), in protobuf's JSON form. */
  header: JsonObject;
  /** The payload in protobuf's JSON form (lowerCamelCase field names). */
  payload: JsonObject;
}

/**
 * A verified reply or event as JSON, for logs and display.
 *
 * @example
 * ```ts
 * for await (const item of client.watch(taskId)) {
 *   if (item.kind === "event") console.log(messageToJson(item.event).payload);
 * }
 * ```
 */
export function messageToJson(message: VerifiedMessage): MessageJson {
  const info = messageTypeInfo(message.type);
  return {
    type: wireName(message.type),
    header: toJson(HeaderSchema, message.header) as JsonObject,
    payload: info === undefined ? {} : (toJson(info.payloadSchema, message.payload as never) as JsonObject),
  };
}
