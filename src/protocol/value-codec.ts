// JSON values as google.protobuf.Value, encoded directly: a task's output
// travels as a Value in its signed task_complete, and encoding it through
// reflection cost more than signing the event. The bytes are what
// toBinary(ValueSchema, toValue(json)) writes (a test checks it), so any
// protobuf library reads them as the Value they are.
import type { JsonValue } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

// google.protobuf.Value's fields, and Struct's and ListValue's.
const NULL_VALUE = 1;
const NUMBER_VALUE = 2;
const STRING_VALUE = 3;
const BOOL_VALUE = 4;
const STRUCT_VALUE = 5;
const LIST_VALUE = 6;
const STRUCT_FIELDS = 1;
const MAP_KEY = 1;
const MAP_VALUE = 2;
const LIST_VALUES = 1;

/** The binary encoding of google.protobuf.Value for a JSON value. */
export function encodeValue(json: JsonValue): Uint8Array {
  return writeValue(new BinaryWriter(), json).finish();
}

/** The binary encoding of google.protobuf.Struct for a JSON object. */
export function encodeStruct(json: { [key: string]: JsonValue }): Uint8Array {
  return writeStruct(new BinaryWriter(), json).finish();
}

function writeValue(writer: BinaryWriter, json: JsonValue): BinaryWriter {
  if (json === null) return writer.tag(NULL_VALUE, WireType.Varint).int32(0);
  switch (typeof json) {
    case "number":
      return writer.tag(NUMBER_VALUE, WireType.Bit64).double(json);
    case "string":
      return writer.tag(STRING_VALUE, WireType.LengthDelimited).string(json);
    case "boolean":
      return writer.tag(BOOL_VALUE, WireType.Varint).bool(json);
  }
  if (Array.isArray(json)) {
    writer.tag(LIST_VALUE, WireType.LengthDelimited).fork();
    for (const item of json) {
      writer.tag(LIST_VALUES, WireType.LengthDelimited).fork();
      writeValue(writer, item).join();
    }
    return writer.join();
  }
  writer.tag(STRUCT_VALUE, WireType.LengthDelimited).fork();
  return writeStruct(writer, json).join();
}

function writeStruct(writer: BinaryWriter, json: { [key: string]: JsonValue }): BinaryWriter {
  for (const [key, value] of Object.entries(json)) {
    // protobuf-es cannot hold a "__proto__" key in a Struct (it would set the prototype): leave it out, as it does.
    if (key === "__proto__") continue;
    writer.tag(STRUCT_FIELDS, WireType.LengthDelimited).fork();
    writer.tag(MAP_KEY, WireType.LengthDelimited).string(key);
    writer.tag(MAP_VALUE, WireType.LengthDelimited).fork();
    writeValue(writer, value).join();
    writer.join();
  }
  return writer;
}
