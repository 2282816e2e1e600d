// A task's result, built once in both forms it is needed in: the message
// views and stores read (with the output as a protobuf Value), and the bytes
// that travel in the signed task_complete, written directly from the JSON
// output (reflecting over a Value cost more than signing the event). The
// message remembers those bytes, so storing or showing it encodes nothing.
// The output's Value tree is only read to show the result as JSON (binary
// views and stores use the remembered bytes), so it is built when first read.
import { create, toBinary, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import { TaskResultSchema, type ResultStream, type TaskResult } from "../../gen/synapse/v1/payloads_pb.js";
import { rememberEncoding, withEncodedField } from "../protocol/encoded.js";
import { toValue } from "../protocol/json-values.js";
import { encodeStruct, encodeValue } from "../protocol/value-codec.js";

// TaskResult's output and metadata fields.
const OUTPUT = 2;
const METADATA = 3;

export interface BuiltResult {
  /** For views and the store (its encoding is remembered). */
  result: TaskResult;
  /** For the signed payload: the same bytes, with output and metadata already encoded. */
  wire: TaskResult;
}

export function buildTaskResult(outputType: string, output: JsonValue | undefined, metadata: JsonObject | undefined, stream: ResultStream | undefined): BuiltResult {
  const wire = create(TaskResultSchema, { outputType, stream });
  if (output !== undefined) withEncodedField(wire, OUTPUT, encodeValue(output));
  if (metadata !== undefined) withEncodedField(wire, METADATA, encodeStruct(metadata));
  const result = create(TaskResultSchema, { outputType, metadata, stream });
  if (output !== undefined) valueWhenRead(result, output);
  rememberEncoding(result, toBinary(TaskResultSchema, wire));
  return { result, wire };
}

/** Gives `result.output` the Value of `output`, made on first read (an own, enumerable field, as create makes it). */
function valueWhenRead(result: TaskResult, output: JsonValue): void {
  const define = (value: Value) => Object.defineProperty(result, "output", { value, writable: true, enumerable: true, configurable: true });
  Object.defineProperty(result, "output", {
    get: () => {
      const value = toValue(output);
      define(value);
      return value;
    },
    set: (value: Value) => define(value),
    enumerable: true,
    configurable: true,
  });
}
