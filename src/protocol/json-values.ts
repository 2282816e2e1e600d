// Free-form JSON on the wire is google.protobuf.Value; in code it is JsonValue.
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

export function toValue(json: JsonValue): Value {
  return fromJson(ValueSchema, json);
}

export function fromValue(value: Value | undefined): JsonValue | undefined {
  return value === undefined ? undefined : toJson(ValueSchema, value);
}
