// A message that travels or is stored is encoded once: the bytes a message
// was decoded from (a received payload: exactly what was signed) or first
// encoded to are kept beside it, and asked for again instead of encoding
// it anew. Only for messages nothing changes after they are made.
import { toBinary, type DescMessage, type Message, type MessageShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

const known = new WeakMap<object, Uint8Array>();

/** Records the bytes a message was decoded from. */
export function rememberEncoding(message: object, bytes: Uint8Array): void {
  known.set(message, bytes);
}

/** The message's bytes: remembered, or encoded now and remembered. */
export function encoded<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): Uint8Array {
  let bytes = known.get(message);
  if (bytes === undefined) {
    bytes = toBinary(schema, message);
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
  const data = new BinaryWriter().bytes(bytes).finish(); // the length prefix, then the bytes
  message.$unknown = [...(message.$unknown ?? []), { no: fieldNumber, wireType: WireType.LengthDelimited, data }];
  return message;
}
