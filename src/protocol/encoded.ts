// A message that travels or is stored is encoded once: the bytes a message
// was decoded from (a received payload: exactly what was signed) or first
// encoded to are kept beside it, and asked for again instead of encoding
// it anew. Only for messages nothing changes after they are made.
import { toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";

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
