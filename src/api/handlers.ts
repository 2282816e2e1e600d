// Handlers as users write them (a function, or an object that also
// describes its task type), and what the agent declares and runs for each.
import { create, type JsonObject, type MessageInitShape } from "@bufbuild/protobuf";
import { SupportedTaskTypeSchema, type EscalationPolicySchema, type SupportedTaskType } from "../../gen/synapse/v1/capabilities_pb.js";
import type { TaskContext, TaskHandler, TaskOutput } from "../agent/handler.js";

/**
 * A handler written as one function: it runs the task and returns its
 * output. Use a {@link TaskTypeHandler} object instead to describe the
 * task type (schemas, description), check tasks before accepting them, or
 * declare the handler resumable.
 *
 * @example
 * ```ts
 * const echo: TaskFunction = async (task) => ({ output: task.payload });
 * ```
 */
export type TaskFunction = (task: TaskContext) => Promise<TaskOutput>;

/**
 * A handler with the description of its task type, as an agent declares it
 * in its capabilities (`SupportedTaskType`). Every field but
 * `executeTask` is optional.
 */
export interface TaskTypeHandler extends TaskHandler {
  /** A human-readable name; default the task type. */
  name?: string;
  /** What the task does, takes and returns. */
  description?: string;
  /**
   * JSON Schema (draft-07) the payload must satisfy, as an object or a JSON
   * string. A task whose payload does not is refused (`invalid_params`)
   * before the handler sees it. Default: any object.
   */
  inputSchema?: JsonObject | string;
  /** JSON Schema (draft-07) the output satisfies; an output that does not fails the task (`output_invalid`). */
  outputSchema?: JsonObject | string;
  /** An estimated duration range, for example "5s-30s". */
  estimatedTime?: string;
  /** Capability tags, for finding agents by capability at a registry. */
  capabilities?: string[];
  /**
   * Who decides this type's human decisions ({@link TaskContext.askHuman})
   * at each escalation level, and how long each level waits before the
   * decision escalates to the next (a new signed `p2p:task_need_human`);
   * after the last level the task fails with `execution_timeout`. Default:
   * the requester decides, with no deadline.
   */
  escalation?: MessageInitShape<typeof EscalationPolicySchema>;
  /**
   * Take only confidential tasks of this type (docs/PROTOCOL.md §9): a
   * plaintext request is refused with `confidentiality_required`. The
   * handler sees plaintext either way and never touches a key.
   */
  requiresConfidentiality?: boolean;
}

/** What a task type is handled with: a {@link TaskFunction} or a {@link TaskTypeHandler}. */
export type HandlerDefinition = TaskFunction | TaskTypeHandler;

/** How a handler definition runs. */
export function handlerOf(definition: HandlerDefinition): TaskHandler {
  return typeof definition === "function" ? { executeTask: definition } : definition;
}

const schemaText = (schema: JsonObject | string | undefined) => (schema === undefined ? "" : typeof schema === "string" ? schema : JSON.stringify(schema));

/** The SupportedTaskType a handler definition declares. */
export function declarationOf(type: string, definition: HandlerDefinition): SupportedTaskType {
  const described: Partial<TaskTypeHandler> = typeof definition === "function" ? {} : definition;
  return create(SupportedTaskTypeSchema, {
    type,
    name: described.name ?? type,
    description: described.description ?? "",
    estimatedTime: described.estimatedTime ?? "",
    inputSchema: schemaText(described.inputSchema),
    outputSchema: schemaText(described.outputSchema),
    capabilities: described.capabilities ?? [],
    escalation: described.escalation,
    requiresConfidentiality: described.requiresConfidentiality ?? false,
  });
}
