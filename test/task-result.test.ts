// A task's result in both forms: the signed bytes written from the JSON
// output, and the message views and stores read, whose output Value is made
// only when something reads it (a JSON view), and then is what toValue makes.
import { fromBinary, isFieldSet, toBinary, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it, vi } from "vitest";
import { TaskResultSchema } from "../gen/synapse/v1/payloads_pb.js";
import * as jsonValues from "../src/protocol/json-values.js";
import { buildTaskResult } from "../src/agent/task-result.js";
import { knownEncoding } from "../src/protocol/encoded.js";

const output = { words: 3, ratio: 0.25, text: "héllo ✓", list: [true, null, { n: -1 }] };

describe("buildTaskResult", () => {
  it("writes the output once as bytes and makes its Value only when read", () => {
    const toValue = vi.spyOn(jsonValues, "toValue");
    try {
      const { result, wire } = buildTaskResult("json", output, { model: "m" }, undefined);
      const bytes = knownEncoding(result)!;
      expect(Buffer.from(bytes)).toEqual(Buffer.from(toBinary(TaskResultSchema, wire)));
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
});
