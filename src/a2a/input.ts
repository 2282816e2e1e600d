// What an A2A message asks of the engine: the task type it names (a skill
// id), the task input its parts make, and, for a message on a task that
// waits, the information or the human decision it answers with. The rules
// are in docs/A2A.md ("Messages and tasks").
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Message, SendMessageRequest } from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { TaskNeedInfoPayload } from "../../gen/synapse/v1/payloads_pb.js";
import { fromValue } from "../protocol/json-values.js";
import { a2aError } from "./errors.js";

/** The metadata keys (of the request, then of the message) that name the task type. */
export const TASK_TYPE_KEYS = ["taskType", "skill", "skillId"] as const;
/** The input field text parts go to (joined with newlines) unless a data part sets it. */
export const TEXT_FIELD = "text";

/**
 * The task type a new message asks for: a metadata key of the request or
 * the message, else the agent's only task type, else the configured default.
 */
export function taskTypeOf(request: SendMessageRequest, taskTypes: readonly string[], defaultSkill: string | undefined): string {
  const message = request.message!;
  for (const metadata of [request.metadata, message.metadata]) {
    for (const key of TASK_TYPE_KEYS) {
      const value = metadata?.[key];
      if (value === undefined) continue;
      if (typeof value !== "string" || !taskTypes.includes(value)) {
        throw a2aError("InvalidParams", `metadata.${key} must name one of this agent's skills: ${taskTypes.join(", ")}`, {
          fieldViolations: [{ field: `metadata.${key}`, description: `one of ${taskTypes.join(", ")}` }],
        });
      }
      return value;
    }
  }
  if (taskTypes.length === 1) return taskTypes[0]!;
  if (defaultSkill !== undefined && taskTypes.includes(defaultSkill)) return defaultSkill;
  throw a2aError("InvalidParams", `name the skill in metadata.taskType: one of ${taskTypes.join(", ")}`, {
    fieldViolations: [{ field: "metadata.taskType", description: `one of ${taskTypes.join(", ")}` }],
  });
}

/** The JSON object a message's parts make: data parts merged in order, text parts joined under "text". */
export function messageInput(message: Message): JsonObject {
  const input: JsonObject = {};
  const texts: string[] = [];
  message.parts.forEach((part, index) => {
    switch (part.content.case) {
      case "text":
        texts.push(part.content.value);
        break;
      case "data": {
        const value = fromValue(part.content.value);
        if (value === null || typeof value !== "object" || Array.isArray(value)) {
          throw a2aError("InvalidParams", `message.parts[${index}].data must be a JSON object (the task input)`, {
            fieldViolations: [{ field: `message.parts[${index}].data`, description: "a JSON object" }],
          });
        }
        Object.assign(input, value);
        break;
      }
      case "raw":
      case "url":
        throw a2aError("ContentTypeNotSupported", `message.parts[${index}]: this agent takes text and data parts, not files`);
      default:
        throw a2aError("InvalidParams", `message.parts[${index}] has no content`, { fieldViolations: [{ field: `message.parts[${index}]`, description: "text, raw, url or data" }] });
    }
  });
  if (texts.length > 0 && input[TEXT_FIELD] === undefined) input[TEXT_FIELD] = texts.join("\n");
  return input;
}

/** The fields a follow-up message provides for a need-info: its input, or its text alone for a single missing field. */
export function providedFields(message: Message, need: TaskNeedInfoPayload | undefined): JsonObject {
  const input = messageInput(message);
  const missing = need?.missingFields.map((field) => field.field) ?? [];
  const onlyText = Object.keys(input).length === 1 && input[TEXT_FIELD] !== undefined;
  if (onlyText && missing.length === 1 && !missing.includes(TEXT_FIELD)) return { [missing[0]!]: input[TEXT_FIELD]! };
  return input;
}

export type DecisionAnswer =
  | { action: "approve" | "modify"; fields: JsonObject; notes: string }
  | { action: "reject"; reason: string; notes: string };

/**
 * The human decision a follow-up message carries: a data part
 * {"decision": "approve" | "modify" | "reject", "fields": {...}, "reason": "...", "notes": "..."},
 * or a text part that is just "approve" or "reject".
 */
export function decisionOf(message: Message): DecisionAnswer {
  const input = messageInput(message);
  const keyword = typeof input.decision === "string" ? input.decision : typeof input[TEXT_FIELD] === "string" ? (input[TEXT_FIELD] as string).trim() : "";
  const action = keyword.toLowerCase();
  const notes = typeof input.notes === "string" ? input.notes : "";
  const fields = input.fields;
  if (action === "reject") return { action, reason: typeof input.reason === "string" ? input.reason : "rejected", notes };
  if (action === "approve" || action === "modify") {
    if (fields !== undefined && !isObject(fields)) throw a2aError("InvalidParams", "decision fields must be a JSON object", { fieldViolations: [{ field: "fields", description: "a JSON object" }] });
    return { action, fields: (fields as JsonObject | undefined) ?? {}, notes };
  }
  throw a2aError("InvalidParams", 'the task waits for a human decision: send a data part {"decision": "approve" | "modify" | "reject", "fields": {...}, "reason": "..."}', {
    fieldViolations: [{ field: "decision", description: "approve, modify or reject" }],
  });
}

function isObject(value: JsonValue): boolean {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
