// Whether a task is taken: the task type must be supported, the deadline
// not passed, the payload valid against the input schema, and the handler's
// validateTask must accept it (or ask for missing fields, or refuse it).
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { TaskConfirmPayloadSchema, TaskNeedInfoPayloadSchema, TaskRejectPayloadSchema } from "../../gen/synapse/v1/payloads_pb.js";
import { toValue } from "../protocol/json-values.js";
import type { TaskRecord } from "../store/store.js";
import type { MissingFieldSpec, TaskHandler } from "./handler.js";
import { toMissingField } from "./missing-fields.js";
import type { Built } from "./recorder.js";
import { clip } from "../protocol/errors.js";
import { requesterMessageId } from "../protocol/message-ids.js";
import type { TaskSchemas } from "./schemas.js";

/** A refusal names at most this many schema problems: the signed task_reject must stay small whatever the payload. */
const MAX_PROBLEMS = 16;

export type Admission =
  | { kind: "accept" }
  | { kind: "need_info"; fields: MissingFieldSpec[]; question?: string }
  | { kind: "reject"; code: ErrorCode; message: string; details?: JsonValue; retryAfterSeconds?: number; suggestedAgentId?: string };

export interface AdmissionContext {
  handlers: ReadonlyMap<string, TaskHandler>;
  schemas: TaskSchemas;
  now: () => number;
}

export async function admissionOutcome(
  context: AdmissionContext,
  taskType: string,
  payload: JsonObject,
  requester: { agentId: string; systemId: string },
  deadline: Timestamp | undefined,
  taskId = "",
  requestMessageId = "",
): Promise<Admission> {
  const handler = context.handlers.get(taskType);
  if (handler === undefined) {
    return { kind: "reject", code: ErrorCode.CAPABILITY_LACKING, message: `task type ${JSON.stringify(clip(taskType))} is not supported`, details: { supported: [...context.handlers.keys()] } };
  }
  if (deadline !== undefined && timestampMs(deadline) <= context.now()) {
    return { kind: "reject", code: ErrorCode.INVALID_PARAMS, message: "the task's deadline has already passed" };
  }
  const check = context.schemas.checkInput(taskType, payload);
  if (!check.valid) {
    const problems = check.problems.slice(0, MAX_PROBLEMS).map((p) => ({ path: clip(p.path), message: clip(p.message) }));
    return {
      kind: "reject",
      code: ErrorCode.INVALID_PARAMS,
      message: `payload does not match the input schema of ${taskType}: ${problems.map((p) => p.message).join("; ")}`,
      details: problems,
    };
  }
  if (handler.validateTask === undefined) return { kind: "accept" };
  try {
    const verdict = await handler.validateTask({ taskId, taskType, payload, requester, requestMessageId: requesterMessageId(requestMessageId) });
    if (verdict.kind === "reject") {
      return {
        kind: "reject",
        code: verdict.code ?? ErrorCode.INVALID_PARAMS,
        message: verdict.message,
        retryAfterSeconds: verdict.retryAfterSeconds,
        suggestedAgentId: verdict.suggestedAgentId,
      };
    }
    return verdict;
  } catch (error) {
    return { kind: "reject", code: ErrorCode.INTERNAL, message: `validation failed: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** The event that announces an admission decision (confirm, need_info or reject), and what it changes. */
export function admissionEvent(task: Pick<TaskRecord, "taskId" | "taskType">, admission: Admission, capabilitiesUsed: readonly string[]): Required<Pick<Built, "type">> & Built {
  switch (admission.kind) {
    case "accept": {
      const message = create(TaskConfirmPayloadSchema, {
        taskId: task.taskId,
        confirmed: true,
        estimatedDurationSeconds: 1,
        capabilitiesUsed: [...capabilitiesUsed],
        constraints: { maxRetries: 0, fallbackEnabled: false },
      });
      return { type: MessageType.TASK_CONFIRM, message, patch: { statusMessage: "confirmed" } };
    }
    case "need_info": {
      const message = create(TaskNeedInfoPayloadSchema, {
        taskId: task.taskId,
        missingFields: admission.fields.map(toMissingField),
        question: admission.question ?? "",
      });
      return { type: MessageType.TASK_NEED_INFO, message, patch: { pendingInfo: message, statusMessage: message.question } };
    }
    case "reject": {
      const message = create(TaskRejectPayloadSchema, {
        taskId: task.taskId,
        reason: { code: admission.code, message: admission.message, details: admission.details === undefined ? undefined : toValue(admission.details) },
        alternatives: { suggestedAgentId: admission.suggestedAgentId ?? "", retryAfterSeconds: admission.retryAfterSeconds ?? 0 },
      });
      return { type: MessageType.TASK_REJECT, message, patch: { rejection: message, statusMessage: admission.message } };
    }
  }
}
