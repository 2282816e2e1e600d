// A message that travels or is stored is encoded once: the bytes a message
// was decoded from (a received payload: exactly what was signed) or first
// encoded to are kept beside it, and asked for again instead of encoding
// it anew. Only for messages nothing changes after they are made.
import { toBinary, type DescMessage, type Message, type MessageShape, type UnknownField } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { varintSize, writeVarint } from "./varint.js";

const known = new WeakMap<object, Uint8Array>();

/** Records the bytes a message was decoded from. */
export function rememberEncoding(message: object, bytes: Uint8Array): void {
  known.set(message, bytes);
}

/** The message's bytes: remembered, or encoded now (by `encode`, toBinary unless given) and remembered. */
export function encoded<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>, encode?: (message: MessageShape<Desc>) => Uint8Array): Uint8Array {
  let bytes = known.get(message);
  if (bytes === undefined) {
    bytes = encode === undefined ? toBinary(schema, message) : encode(message);
    known.set(message, bytes);
  }
  return bytes;
}

/** The bytes remembered for a message, if any (nothing is encoded). */
export function knownEncoding(message: object): Uint8Array | undefined {
  return known.get(message);
}

/**
 * Puts already-encoded bytes into a message field as it will be written in
 * binary (as an unknown field, which the binary writer copies verbatim).
 * Only for messages that go out in binary: JSON leaves unknown fields out.
 */
export function withEncodedField<T extends Message>(message: T, fieldNumber: number, bytes: Uint8Array): T {
  const data = delimitedFields([[undefined, bytes]]); // the length prefix, then the bytes
  message.$unknown = [...(message.$unknown ?? []), { no: fieldNumber, wireType: WireType.LengthDelimited, data }];
  return message;
}

/**
 * A message whose every field is already encoded (`message` has none set, nor unknown fields):
 * the fields go in as withEncodedField puts them, for any binary writer, and
 * the whole message's bytes, which toBinary would write the same, are
 * remembered for a writer that asks (knownEncoding) and need not run it.
 */
export function fromEncodedFields<T extends Message>(message: T, fields: ReadonlyArray<readonly [fieldNumber: number, bytes: Uint8Array]>): T {
  const whole = delimitedFields(fields);
  // Each unknown field's data (its length prefix and bytes) is a view into the whole, not a copy.
  const unknown: UnknownField[] = [];
  let at = 0;
  for (const [no, bytes] of fields) {
    const start = at + varintSize(no * 8);
    at = start + varintSize(bytes.byteLength) + bytes.byteLength;
    unknown.push({ no, wireType: WireType.LengthDelimited, data: whole.subarray(start, at) });
  }
  message.$unknown = unknown;
  known.set(message, whole);
  return message;
}

/**
 * Length-delimited fields, each a field number and its bytes, written in
 * order into one buffer of the exact size: what BinaryWriter's
 * tag(number, LengthDelimited).bytes(bytes) writes for each, without its
 * buffer growing from 128 bytes by doubling. An undefined field number
 * writes the length prefix and bytes alone.
 */
export function delimitedFields(fields: ReadonlyArray<readonly [fieldNumber: number | undefined, bytes: Uint8Array]>): Uint8Array {
  let size = 0;
  // Tags as numbers, not int32 shifts: field numbers go up to 2^29 - 1.
  for (const [no, bytes] of fields) size += (no === undefined ? 0 : varintSize(no * 8)) + varintSize(bytes.byteLength) + bytes.byteLength;
  const out = new Uint8Array(size);
  let at = 0;
  for (const [no, bytes] of fields) {
    if (no !== undefined) at = writeVarint(out, at, no * 8 + WireType.LengthDelimited);
    at = writeVarint(out, at, bytes.byteLength);
    out.set(bytes, at);
    at += bytes.byteLength;
  }
  return out;
}
