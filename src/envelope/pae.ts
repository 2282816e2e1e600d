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

/** Writes `value` (a length: below 2^53, so the top bit is clear) as LE64 at `offset`, without a BigInt or a buffer per length. */
function putLe64(view: DataView, offset: number, value: number): void {
  view.setUint32(offset, value >>> 0, true);
  view.setUint32(offset + 4, Math.floor(value / 0x1_0000_0000), true);
}

export function pae(pieces: readonly Uint8Array[]): Uint8Array {
  let total = 8;
  for (const piece of pieces) total += 8 + piece.byteLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  putLe64(view, 0, pieces.length);
  let offset = 8;
  for (const piece of pieces) {
    putLe64(view, offset, piece.byteLength);
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
