// JSON values as google.protobuf.Value, encoded directly: a task's output
// travels as a Value in its signed task_complete, and encoding it through
// reflection cost more than signing the event. The bytes are what
// toBinary(ValueSchema, toValue(json)) writes (a test checks it), so any
// protobuf library reads them as the Value they are.
//
// Two passes: the first measures every length-delimited part in the order
// the second writes their length prefixes, so the second writes straight
// into one buffer of the right size (no forks, no chunks to join).
import type { JsonValue } from "@bufbuild/protobuf";
import { varintSize, writeVarint } from "./varint.js";

// Tags (field number << 3 | wire type) of google.protobuf.Value's fields, and Struct's and ListValue's.
const NULL_VALUE = 0x08; // 1, varint
const NUMBER_VALUE = 0x11; // 2, 64-bit
const STRING_VALUE = 0x1a; // 3, length-delimited
const BOOL_VALUE = 0x20; // 4, varint
const STRUCT_VALUE = 0x2a; // 5, length-delimited
const LIST_VALUE = 0x32; // 6, length-delimited
const STRUCT_FIELDS = 0x0a; // Struct.fields (map entries), 1
const MAP_KEY = 0x0a; // entry key, 1
const MAP_VALUE = 0x12; // entry value, 2
const LIST_VALUES = 0x0a; // ListValue.values, 1

type JsonObject = { [key: string]: JsonValue };

/** The binary encoding of google.protobuf.Value for a JSON value. */
export function encodeValue(json: JsonValue): Uint8Array {
  const lengths: number[] = [];
  return new Writer(sizeValue(json, lengths), lengths).value(json).bytes;
}

/** The binary encoding of google.protobuf.Struct for a JSON object. */
export function encodeStruct(json: JsonObject): Uint8Array {
  const lengths: number[] = [];
  return new Writer(sizeStruct(json, lengths), lengths).struct(json).bytes;
}

/** A length-delimited part of `size` bytes with its prefix, its length recorded at `slot`. */
function delimited(lengths: number[], slot: number, size: number): number {
  lengths[slot] = size;
  return 1 + varintSize(size) + size;
}

// Every key travels, "__proto__" too (JSON.parse makes it an own key, and so does protobuf-es).
// Keys rather than entries: one array per object, not one more per field (each object is walked twice).
const keysOf = (json: JsonObject) => Object.keys(json);

/** The size of a Value's fields; pushes the lengths of its parts, in writing order. */
function sizeValue(json: JsonValue, lengths: number[]): number {
  if (json === null) return 2;
  switch (typeof json) {
    case "number":
      return 9;
    case "string":
      return delimited(lengths, lengths.push(0) - 1, Buffer.byteLength(json));
    case "boolean":
      return 2;
  }
  const slot = lengths.push(0) - 1;
  if (Array.isArray(json)) {
    let size = 0;
    for (const item of json) {
      const itemSlot = lengths.push(0) - 1;
      size += delimited(lengths, itemSlot, sizeValue(item, lengths));
    }
    return delimited(lengths, slot, size);
  }
  return delimited(lengths, slot, sizeStruct(json, lengths));
}

function sizeStruct(json: JsonObject, lengths: number[]): number {
  let size = 0;
  for (const key of keysOf(json)) {
    const entrySlot = lengths.push(0) - 1;
    const keySize = delimited(lengths, lengths.push(0) - 1, Buffer.byteLength(key));
    const valueSize = delimited(lengths, lengths.push(0) - 1, sizeValue(json[key]!, lengths));
    size += delimited(lengths, entrySlot, keySize + valueSize);
  }
  return size;
}

class Writer {
  // Not from Buffer's shared pool: the bytes are kept as long as the task, and must not pin a pool slab.
  readonly bytes: Buffer;
  private at = 0;
  private next = 0;

  constructor(
    size: number,
    private readonly lengths: number[],
  ) {
    this.bytes = Buffer.allocUnsafeSlow(size);
  }

  value(json: JsonValue): this {
    if (json === null) return this.byte(NULL_VALUE).byte(0);
    switch (typeof json) {
      case "number":
        this.byte(NUMBER_VALUE);
        this.at = this.bytes.writeDoubleLE(json, this.at);
        return this;
      case "string":
        return this.byte(STRING_VALUE).text(json);
      case "boolean":
        return this.byte(BOOL_VALUE).byte(json ? 1 : 0);
    }
    if (Array.isArray(json)) {
      this.byte(LIST_VALUE).prefix();
      for (const item of json) this.byte(LIST_VALUES).prefix().value(item);
      return this;
    }
    return this.byte(STRUCT_VALUE).prefix().struct(json);
  }

  struct(json: JsonObject): this {
    for (const key of keysOf(json)) {
      this.byte(STRUCT_FIELDS).prefix();
      this.byte(MAP_KEY).text(key);
      this.byte(MAP_VALUE).prefix().value(json[key]!);
    }
    return this;
  }

  private byte(value: number): this {
    this.bytes[this.at++] = value;
    return this;
  }

  /** The next recorded length, as a varint. */
  private prefix(): this {
    this.at = writeVarint(this.bytes, this.at, this.lengths[this.next++]!);
    return this;
  }

  private text(value: string): this {
    const length = this.lengths[this.next]!;
    this.prefix();
    this.at += this.bytes.write(value, this.at, length, "utf8");
    return this;
  }
}
