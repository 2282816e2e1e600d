// Envelopes encoded directly: a sealed envelope is stored and sent as its
// bytes, and protobuf-es's writer grows its buffer from 128 bytes by
// doubling, copying the header and payload several times over. The fields
// are a few byte strings and one small message, so their size is known up
// front and they are written once into a buffer of that size. The bytes are
// what toBinary(EnvelopeSchema, envelope) writes (a test checks it); an
// envelope this encoder does not cover (unknown fields, a negative enum) is
// left to toBinary.
import { toBinary } from "@bufbuild/protobuf";
import { EnvelopeSchema, type Envelope, type Signature } from "../../gen/synapse/v1/envelope_pb.js";
import { encoded } from "./encoded.js";
import { SizedWriter } from "./sized-writer.js";
import { varintSize } from "./varint.js";

// Tags (field number << 3 | wire type) of Envelope's and Signature's fields.
const ENVELOPE_HEADER = 0x0a; // 1, length-delimited
const ENVELOPE_PAYLOAD = 0x12; // 2, length-delimited
const ENVELOPE_SIGNATURE = 0x1a; // 3, length-delimited
const SIGNATURE_ALGORITHM = 0x08; // 1, varint
const SIGNATURE_KEY_ID = 0x12; // 2, length-delimited
const SIGNATURE_VALUE = 0x1a; // 3, length-delimited
const SIGNATURE_PUBLIC_KEY = 0x22; // 4, length-delimited

const delimited = (size: number) => 1 + varintSize(size) + size;

/** The envelope's bytes: remembered, or encoded now (directly) and remembered. */
export function envelopeEncoding(envelope: Envelope): Uint8Array {
  return encoded(EnvelopeSchema, envelope, encodeEnvelope);
}

/** The binary encoding of an Envelope, as toBinary writes it. */
export function encodeEnvelope(envelope: Envelope): Uint8Array {
  const signature = envelope.signature;
  if (envelope.$unknown?.length || (signature !== undefined && (signature.$unknown?.length || signature.algorithm < 0))) {
    return toBinary(EnvelopeSchema, envelope);
  }
  const keyIdBytes = signature === undefined ? 0 : Buffer.byteLength(signature.keyId);
  const signatureSize = signature === undefined ? 0 : sizeSignature(signature, keyIdBytes);
  const size =
    (envelope.header.byteLength > 0 ? delimited(envelope.header.byteLength) : 0) +
    (envelope.payload.byteLength > 0 ? delimited(envelope.payload.byteLength) : 0) +
    (signature === undefined ? 0 : delimited(signatureSize));
  const out = new SizedWriter(size, "envelope");
  out.bytesField(ENVELOPE_HEADER, envelope.header);
  out.bytesField(ENVELOPE_PAYLOAD, envelope.payload);
  if (signature !== undefined) {
    out.byte(ENVELOPE_SIGNATURE);
    out.varint(signatureSize);
    if (signature.algorithm !== 0) {
      out.byte(SIGNATURE_ALGORITHM);
      out.varint(signature.algorithm);
    }
    if (keyIdBytes > 0) {
      out.byte(SIGNATURE_KEY_ID);
      out.varint(keyIdBytes);
      out.text(signature.keyId, keyIdBytes);
    }
    out.bytesField(SIGNATURE_VALUE, signature.value);
    out.bytesField(SIGNATURE_PUBLIC_KEY, signature.publicKey);
  }
  return out.done();
}

function sizeSignature(signature: Signature, keyIdBytes: number): number {
  return (
    (signature.algorithm !== 0 ? 1 + varintSize(signature.algorithm) : 0) +
    (keyIdBytes > 0 ? delimited(keyIdBytes) : 0) +
    (signature.value.byteLength > 0 ? delimited(signature.value.byteLength) : 0) +
    (signature.publicKey.byteLength > 0 ? delimited(signature.publicKey.byteLength) : 0)
  );
}
