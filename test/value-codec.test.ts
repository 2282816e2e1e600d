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

  it("writes the bytes protobuf-es writes for any text: multi-byte characters, lone surrogates", () => {
    const anyText = fc.jsonValue({ maxDepth: 3, stringUnit: "binary" }).map((value) => JSON.parse(JSON.stringify(value)) as never);
    fc.assert(
      fc.property(anyText, (value) => {
        expect(Buffer.from(encodeValue(value))).toEqual(Buffer.from(toBinary(ValueSchema, toValue(value))));
      }),
      { numRuns: 500 },
    );
    // Lengths past one varint byte, and a number protobuf-es writes as a double like any other.
    const long = { ["k".repeat(200)]: ["é".repeat(20_000), -0, 1e308, 5e-324, null, true, false, ""] };
    expect(Buffer.from(encodeValue(long))).toEqual(Buffer.from(toBinary(ValueSchema, toValue(long))));
  });

  it("reads back as the same JSON value", () => {
    fc.assert(
      fc.property(json, (value) => {
        expect(fromValue(fromBinary(ValueSchema, encodeValue(value)))).toEqual(value);
      }),
      { numRuns: 300 },
    );
    // A "__proto__" key is data like any other: it travels and comes back as an own key, and sets no prototype.
    const hostile = JSON.parse('{"__proto__": {"polluted": true}, "kept": 1}');
    const decoded = fromValue(fromBinary(ValueSchema, encodeValue(hostile))) as Record<string, unknown>;
    expect(Object.keys(decoded)).toEqual(["__proto__", "kept"]);
    expect(Object.getOwnPropertyDescriptor(decoded, "__proto__")?.value).toEqual({ polluted: true });
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
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
