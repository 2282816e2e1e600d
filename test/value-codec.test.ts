// The direct Value encoder writes what protobuf-es's reflective encoder
// writes, for any JSON value, and reads back as the same value.
import { fromBinary, fromJson, toBinary } from "@bufbuild/protobuf";
import { StructSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fromValue, toValue } from "../src/protocol/json-values.js";
import { encodeStruct, encodeValue } from "../src/protocol/value-codec.js";

const json = fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.parse(JSON.stringify(value)) as never);

describe("encodeValue", () => {
  it("writes the bytes protobuf-es writes for the same Value", () => {
    fc.assert(
      fc.property(json, (value) => {
        expect(Buffer.from(encodeValue(value))).toEqual(Buffer.from(toBinary(ValueSchema, toValue(value))));
      }),
      { numRuns: 500 },
    );
  });

  it("reads back as the same JSON value", () => {
    fc.assert(
      fc.property(json, (value) => {
        expect(fromValue(fromBinary(ValueSchema, encodeValue(value)))).toEqual(value);
      }),
      { numRuns: 300 },
    );
  });

  it("encodes a Struct as protobuf-es does", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), json), (object) => {
        expect(Buffer.from(encodeStruct(object))).toEqual(Buffer.from(toBinary(StructSchema, fromJson(StructSchema, object))));
      }),
      { numRuns: 200 },
    );
  });
});
