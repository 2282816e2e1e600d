// A task's result in both forms: the signed bytes written from the JSON
// output, and the message views and stores read, whose output Value is made
// only when something reads it (a JSON view), and then is what toValue makes.
import { create, fromBinary, isFieldSet, toBinary, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import fc from "fast-check";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it, vi } from "vitest";
import { ResultStreamSchema, TaskCompletePayloadSchema, TaskResultSchema } from "../gen/synapse/v1/payloads_pb.js";
import * as jsonValues from "../src/protocol/json-values.js";
import { buildTaskResult, completePayloadBytes } from "../src/agent/task-result.js";
import { knownEncoding } from "../src/protocol/encoded.js";

const output = { words: 3, ratio: 0.25, text: "héllo ✓", list: [true, null, { n: -1 }] };

describe("buildTaskResult", () => {
  it("writes the output once as bytes and makes its Value only when read", () => {
    const toValue = vi.spyOn(jsonValues, "toValue");
    try {
      const built = buildTaskResult("json", output, { model: "m" }, undefined);
      const { result } = built;
      const bytes = knownEncoding(result)!;
      expect(bytes).toBe(built.bytes);
      expect(toValue).not.toHaveBeenCalled();
      expect(isFieldSet(result, TaskResultSchema.field.output)).toBe(true);
      expect(toJson(TaskResultSchema, result)).toEqual({ outputType: "json", output, metadata: { model: "m" } });
      expect(toValue).toHaveBeenCalledTimes(1);
      expect(result.output).toBe(result.output); // made once
      expect(toValue).toHaveBeenCalledTimes(1);
      // The bytes decode to the same result the view shows.
      expect(toJson(TaskResultSchema, fromBinary(TaskResultSchema, bytes))).toEqual(toJson(TaskResultSchema, result));
      expect(toBinary(TaskResultSchema, result)).toEqual(bytes);
    } finally {
      toValue.mockRestore();
    }
  });

  it("lets the output be replaced, and leaves it unset when there is none", () => {
    const { result } = buildTaskResult("json", output, undefined, undefined);
    result.output = jsonValues.toValue("other");
    expect(toJson(ValueSchema, result.output)).toBe("other");
    const none = buildTaskResult("json", undefined, undefined, undefined).result;
    expect(isFieldSet(none, TaskResultSchema.field.output)).toBe(false);
    expect(toJson(TaskResultSchema, none)).toEqual({ outputType: "json" });
  });

  // Strings of any UTF-16 code units, lone surrogates included (fast-check's "binary" strings hold none).
  const text = fc.oneof(fc.string({ unit: "grapheme" }), fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((u) => String.fromCharCode(u)) }), fc.constant(""));

  it("writes the result and the task_complete payload as toBinary writes them from the messages", () => {
    fc.assert(
      fc.property(
        text,
        fc.option(fc.jsonValue() as fc.Arbitrary<JsonValue>, { nil: undefined }),
        fc.option(fc.dictionary(fc.string(), fc.jsonValue()) as fc.Arbitrary<JsonObject>, { nil: undefined }),
        text,
        text,
        fc.boolean(),
        (outputType, output, metadata, taskId, summary, withStream) => {
          const stream = withStream ? create(ResultStreamSchema, { streamId: taskId, totalSize: 5n, contentType: "text/plain" }) : undefined;
          const { result, bytes } = buildTaskResult(outputType, output, metadata, stream);
          const message = create(TaskResultSchema, { outputType, output: output === undefined ? undefined : jsonValues.toValue(output), metadata, stream });
          const expected = toBinary(TaskResultSchema, message);
          // With a stream (field 4) the already-encoded output and metadata follow it: the same fields, in another order.
          if (withStream) expect(toJson(TaskResultSchema, fromBinary(TaskResultSchema, bytes))).toEqual(toJson(TaskResultSchema, fromBinary(TaskResultSchema, expected)));
          else expect(Buffer.from(bytes).equals(Buffer.from(expected))).toBe(true);
          expect(knownEncoding(result)).toBe(bytes);
          const payload = completePayloadBytes(taskId, bytes, summary);
          const wanted = toBinary(TaskCompletePayloadSchema, create(TaskCompletePayloadSchema, { taskId, result: fromBinary(TaskResultSchema, bytes), summary }));
          if (!withStream) expect(Buffer.from(payload).equals(Buffer.from(wanted))).toBe(true);
          expect(toJson(TaskCompletePayloadSchema, fromBinary(TaskCompletePayloadSchema, payload))).toEqual(toJson(TaskCompletePayloadSchema, fromBinary(TaskCompletePayloadSchema, wanted)));
        },
      ),
      { numRuns: 300 },
    );
  });
});
