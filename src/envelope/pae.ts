// The signing input of an envelope: PASETO's pre-authentication encoding
// (PAE) over a domain string and the exact header and payload bytes.
//
//   PAE(pieces) = LE64(len(pieces)) || for each piece: LE64(len(piece)) || piece
//
// LE64 is an unsigned 64-bit little-endian integer whose top bit is clear.
// Length prefixes make the concatenation unambiguous; the domain string keeps
// a signature over an envelope from ever being valid for anything else.
// No imports (not even ../crypto/encoding.js, which uses Buffer): the
// browser console bundles this file as it is.

/** The domain string that begins every envelope's signing input. */
export const ENVELOPE_SIGNING_DOMAIN = "synapse.v1.Envelope";
const DOMAIN_BYTES = new TextEncoder().encode(ENVELOPE_SIGNING_DOMAIN);

function le64(value: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value) & 0x7fff_ffff_ffff_ffffn, true);
  return out;
}

export function pae(pieces: readonly Uint8Array[]): Uint8Array {
  const total = 8 + pieces.reduce((sum, piece) => sum + 8 + piece.byteLength, 0);
  const out = new Uint8Array(total);
  out.set(le64(pieces.length), 0);
  let offset = 8;
  for (const piece of pieces) {
    out.set(le64(piece.byteLength), offset);
    offset += 8;
    out.set(piece, offset);
    offset += piece.byteLength;
  }
  return out;
}

/**
 * The bytes an envelope's Ed25519 signature covers:
 * `PAE(["synapse.v1.Envelope", header, payload])`, where PAE is PASETO's
 * pre-authentication encoding (the count of pieces, then each piece's length,
 * all as 64-bit little-endian, before each piece). `header` and `payload`
 * are the envelope's bytes exactly as they travel (docs/PROTOCOL.md §2.1).
 */
export function envelopeSigningInput(header: Uint8Array, payload: Uint8Array): Uint8Array {
  return pae([DOMAIN_BYTES, header, payload]);
}
