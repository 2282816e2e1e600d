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
import { delimited, FieldWriter, sizeText } from "../protocol/sized-writer.js";
import { encodeStruct, encodeValue } from "../protocol/value-codec.js";

// Field numbers of TaskResult's output and metadata; tags of the fields written directly.
const OUTPUT = 2;
const METADATA = 3;
const RESULT_OUTPUT_TYPE = 0x0a; // TaskResult.output_type, 1
const RESULT_OUTPUT = 0x12; // TaskResult.output, 2
const RESULT_METADATA = 0x1a; // TaskResult.metadata, 3
const COMPLETE_TASK_ID = 0x0a; // TaskCompletePayload.task_id, 1
const COMPLETE_RESULT = 0x12; // TaskCompletePayload.result, 2
const COMPLETE_SUMMARY = 0x1a; // TaskCompletePayload.summary, 3

export interface BuiltResult {
  /** For views and the store (its encoding is remembered). */
  result: TaskResult;
  /** Its binary encoding, as the signed task_complete carries it. */
  bytes: Uint8Array;
}

export function buildTaskResult(outputType: string, output: JsonValue | undefined, metadata: JsonObject | undefined, stream: ResultStream | undefined): BuiltResult {
  const outputBytes = output === undefined ? undefined : encodeValue(output);
  const metadataBytes = metadata === undefined ? undefined : encodeStruct(metadata);
  const result = create(TaskResultSchema, { outputType, metadata, stream });
  if (output !== undefined) valueWhenRead(result, output);
  const bytes = stream === undefined ? resultBytes(outputType, outputBytes, metadataBytes) : withStream(outputType, outputBytes, metadataBytes, stream);
  rememberEncoding(result, bytes);
  return { result, bytes };
}

/** TaskResult's fields in number order, as toBinary writes them (a result stream, field 4, goes through withStream). */
function resultBytes(outputType: string, output: Uint8Array | undefined, metadata: Uint8Array | undefined): Uint8Array {
  const texts: number[] = [];
  const size = sizeText(outputType, texts) + (output === undefined ? 0 : delimited(output.byteLength)) + (metadata === undefined ? 0 : delimited(metadata.byteLength));
  const out = new FieldWriter(size, texts, "task result");
  out.textField(RESULT_OUTPUT_TYPE, outputType);
  if (output !== undefined) out.messageField(RESULT_OUTPUT, output);
  if (metadata !== undefined) out.messageField(RESULT_METADATA, metadata);
  return out.done();
}

/** A result with a stream (rare: a large output): toBinary, with output and metadata placed as already encoded. */
function withStream(outputType: string, output: Uint8Array | undefined, metadata: Uint8Array | undefined, stream: ResultStream): Uint8Array {
  const wire = create(TaskResultSchema, { outputType, stream });
  if (output !== undefined) withEncodedField(wire, OUTPUT, output);
  if (metadata !== undefined) withEncodedField(wire, METADATA, metadata);
  return toBinary(TaskResultSchema, wire);
}

/** The binary TaskCompletePayload for a task, its result's bytes (BuiltResult.bytes) and a summary, as toBinary writes it. */
export function completePayloadBytes(taskId: string, result: Uint8Array, summary: string): Uint8Array {
  const texts: number[] = [];
  const size = sizeText(taskId, texts) + delimited(result.byteLength) + sizeText(summary, texts);
  const out = new FieldWriter(size, texts, "task_complete payload");
  out.textField(COMPLETE_TASK_ID, taskId);
  out.messageField(COMPLETE_RESULT, result);
  out.textField(COMPLETE_SUMMARY, summary);
  return out.done();
}

/** The JSON a result's output Value is made from, kept until the Value is first read. */
const PENDING_OUTPUT = Symbol("pending output");
type Pending = TaskResult & { [PENDING_OUTPUT]?: JsonValue };

/** Replaces the accessor with the Value as a plain field, and lets the JSON go. */
function settle(result: Pending, value: Value): void {
  result[PENDING_OUTPUT] = undefined;
  Object.defineProperty(result, "output", { value, writable: true, enumerable: true, configurable: true });
}

// One accessor for every result: a getter made per result gave each result
// an accessor of its own, which V8 can only keep in a dictionary-mode object
// with new property data allocated in the old generation, every task.
const LAZY_OUTPUT: PropertyDescriptor = {
  get(this: Pending): Value {
    const value = toValue(this[PENDING_OUTPUT]!);
    settle(this, value);
    return value;
  },
  set(this: Pending, value: Value): void {
    settle(this, value);
  },
  enumerable: true,
  configurable: true,
};

/** Gives `result.output` the Value of `output`, made on first read (an own, enumerable field, as create makes it). */
function valueWhenRead(result: TaskResult, output: JsonValue): void {
  Object.defineProperty(result, PENDING_OUTPUT, { value: output, writable: true }); // not enumerable: not part of the message
  Object.defineProperty(result, "output", LAZY_OUTPUT);
}
