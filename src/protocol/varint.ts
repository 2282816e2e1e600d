// Protobuf varints for the direct encoders (value-codec.ts, envelope-codec.ts,
// delimitedFields in encoded.ts), which size a message before writing it into
// one buffer. Lengths and tags only: non-negative and below 2^32.

/** How many bytes `n` takes as a varint. */
export const varintSize = (n: number): number => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);

/** Writes `value` as a varint at `at`; returns the offset after it. */
export function writeVarint(out: Uint8Array, at: number, value: number): number {
  while (value > 0x7f) {
    out[at++] = (value & 0x7f) | 0x80;
    value >>>= 7;
  }
  out[at++] = value;
  return at;
}
