// Signed-message inputs tests often need.
import { create } from "@bufbuild/protobuf";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskRequestPayloadSchema, type TaskRequestPayload } from "../../gen/synapse/v1/payloads_pb.js";

/** The arguments of SynapseClient.envelope for a text_analysis task_request with this task id. */
export function taskRequest(taskId: string, text = "Hello there."): [MessageType, TaskRequestPayload, { taskId: string }] {
  return [MessageType.TASK_REQUEST, create(TaskRequestPayloadSchema, { task: { id: taskId, type: "text_analysis", payload: { text } } }), { taskId }];
}
