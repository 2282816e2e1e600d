// Signed messages on the wire, encoded once. A reply or an event is sealed
// once; for binary replies (gRPC, gRPC-web, Connect binary) its
// SignedMessage (the envelope and its decoded view) and TaskEvent are built
// from the envelope's own bytes, kept beside it, and placed into each
// response as already-encoded fields, so the Send reply, every Watch stream
// and every callback carry the same bytes without encoding them again. The
// view's header and payload are exactly the envelope's signed bytes: a
// decoded Header encodes to the same message. JSON replies take the usual
// path (a JSON reader gets the typed view from the message itself).
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { type Envelope, type MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { PayloadSchema } from "../../gen/synapse/v1/payloads_pb.js";
import { delimitedFields } from "../protocol/encoded.js";
import { envelopeEncoding } from "../protocol/envelope-codec.js";

export { withEncodedField } from "../protocol/encoded.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import type { StoredEvent, StoredReply } from "../store/store.js";

// Field numbers of synapse.v1.SignedMessage, EnvelopeView and TaskEvent.
const SIGNED_ENVELOPE = 1;
const SIGNED_VIEW = 2;
const VIEW_HEADER = 1;
const VIEW_PAYLOAD = 2;
const EVENT_SEQUENCE = 1;
const EVENT_MESSAGE = 2;

/** The Payload oneof field that carries each message type's payload. */
const payloadField = new Map<MessageType, number>();
function payloadFieldOf(type: MessageType): number {
  let number = payloadField.get(type);
  if (number === undefined) {
    const info = messageTypeInfo(type);
    const field = PayloadSchema.fields.find((f) => f.localName === info?.payloadCase);
    if (field === undefined) throw new TypeError(`message type ${type} has no Payload field`);
    number = field.number;
    payloadField.set(type, number);
  }
  return number;
}

const signedMessages = new WeakMap<Envelope, Uint8Array>();
const taskEvents = new WeakMap<Envelope, Uint8Array>();

/** The binary encoding of SignedMessage { envelope, view } for a sealed message. */
export function signedMessageBytes(stored: StoredReply): Uint8Array {
  let bytes = signedMessages.get(stored.envelope);
  if (bytes === undefined) {
    // A confidential message's view is its header only: its payload is ciphertext (docs/PROTOCOL.md §9.4).
    const view =
      stored.header.confidential !== undefined
        ? delimitedFields([[VIEW_HEADER, stored.envelope.header]])
        : delimitedFields([
            [VIEW_HEADER, stored.envelope.header],
            [VIEW_PAYLOAD, delimitedFields([[payloadFieldOf(stored.header.messageType), stored.envelope.payload]])],
          ]);
    bytes = delimitedFields([
      [SIGNED_ENVELOPE, envelopeEncoding(stored.envelope)],
      [SIGNED_VIEW, view],
    ]);
    signedMessages.set(stored.envelope, bytes);
  }
  return bytes;
}

/** The binary encoding of TaskEvent { sequence, message } for a task's event. */
export function taskEventBytes(event: StoredEvent): Uint8Array {
  let bytes = taskEvents.get(event.envelope);
  if (bytes === undefined) {
    bytes = new BinaryWriter()
      .tag(EVENT_SEQUENCE, WireType.Varint)
      .uint64(event.sequence)
      .tag(EVENT_MESSAGE, WireType.LengthDelimited)
      .bytes(signedMessageBytes(event))
      .finish();
    taskEvents.set(event.envelope, bytes);
  }
  return bytes;
}
