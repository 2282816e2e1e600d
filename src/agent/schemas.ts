// JSON Schema (draft-07) checks of task payloads and results, compiled once
// per task type from its SupportedTaskType declaration.
import type { JsonValue } from "@bufbuild/protobuf";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import type { SupportedTaskType } from "../../gen/synapse/v1/capabilities_pb.js";

export interface SchemaProblem {
  /** JSON pointer of the offending value ("" for the root). */
  path: string;
  message: string;
  /** Set when a required property is missing. */
  missingProperty?: string;
}

export type SchemaCheck = { valid: true } | { valid: false; problems: SchemaProblem[] };

function problems(errors: ErrorObject[] | null | undefined): SchemaProblem[] {
  return (errors ?? []).map((error) => ({
    path: error.instancePath,
    message: `${error.instancePath || "payload"} ${error.message ?? "is invalid"}`,
    ...(error.keyword === "required" ? { missingProperty: String((error.params as { missingProperty: string }).missingProperty) } : {}),
  }));
}

export class TaskSchemas {
  private readonly inputs = new Map<string, ValidateFunction>();
  private readonly outputs = new Map<string, ValidateFunction>();

  /** Throws when a declared schema is not valid JSON Schema: a configuration error. */
  constructor(taskTypes: readonly SupportedTaskType[]) {
    const ajv = new Ajv({ allErrors: true, strict: false });
    for (const taskType of taskTypes) {
      if (taskType.inputSchema) this.inputs.set(taskType.type, ajv.compile(JSON.parse(taskType.inputSchema) as object));
      if (taskType.outputSchema) this.outputs.set(taskType.type, ajv.compile(JSON.parse(taskType.outputSchema) as object));
    }
  }

  checkInput(taskType: string, payload: JsonValue): SchemaCheck {
    return this.check(this.inputs.get(taskType), payload);
  }

  checkOutput(taskType: string, output: JsonValue): SchemaCheck {
    return this.check(this.outputs.get(taskType), output);
  }

  private check(validate: ValidateFunction | undefined, value: JsonValue): SchemaCheck {
    if (validate === undefined || validate(value)) return { valid: true };
    return { valid: false, problems: problems(validate.errors) };
  }
}
