// The decoded, typed view that responses carry beside each signed envelope,
// so JSON readers need not decode base64 protobuf by hand.
import { create, fromBinary, type Message } from "@bufbuild/protobuf";
import { HeaderSchema, type Envelope, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { SignedMessageSchema, type EnvelopeView, EnvelopeViewSchema, type SignedMessage } from "../../gen/synapse/v1/p2p_pb.js";
import { PayloadSchema, type Payload } from "../../gen/synapse/v1/payloads_pb.js";
import { messageTypeInfo } from "../protocol/message-types.js";

export function payloadView(header: Header, payload: Message): Payload {
  const info = messageTypeInfo(header.messageType);
  if (info === undefined) return create(PayloadSchema);
  return create(PayloadSchema, { body: { case: info.payloadCase, value: payload } as Payload["body"] });
}

/** The view of a message: a confidential one shows its header only (its payload is for its parties, docs/PROTOCOL.md §9.4). */
export function envelopeView(header: Header, payload: Message): EnvelopeView {
  if (header.confidential !== undefined) return create(EnvelopeViewSchema, { header });
  return create(EnvelopeViewSchema, { header, payload: payloadView(header, payload) });
}

export function signedMessage(envelope: Envelope, header: Header, payload: Message): SignedMessage {
  return create(SignedMessageSchema, { envelope, view: envelopeView(header, payload) });
}

/** Decodes an envelope without verifying it: for display only. */
export function decodeUnverified(envelope: Envelope): { header: Header; payload: Message | undefined } {
  const header = fromBinary(HeaderSchema, envelope.header);
  const info = messageTypeInfo(header.messageType);
  if (header.confidential !== undefined) return { header, payload: undefined };
  return { header, payload: info === undefined ? undefined : fromBinary(info.payloadSchema, envelope.payload) };
}
