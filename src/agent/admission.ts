// Whether a task is taken: the task type must be supported, the deadline
// not passed, the payload valid against the input schema, and the handler's
// validateTask must accept it (or ask for missing fields, or refuse it).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { MissingFieldSpec, TaskHandler } from "./handler.js";
import { clip } from "../protocol/errors.js";
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
    const verdict = await handler.validateTask({ taskId, taskType, payload, requester });
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
