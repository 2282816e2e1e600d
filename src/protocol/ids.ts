// The ids this package makes for messages and tasks: RFC 9562 version 7
// UUIDs, the Unix time in milliseconds followed by random bits. A receiver
// keeps the ids it sees in indexes (seen messages for replays, tasks by id);
// ids made in time order arrive near those indexes' last pages, so a
// durable store's commit rewrites a few pages where random (version 4) ids
// dirty one page each. Both are valid ids on the wire (Header.message_id).
// Works in Node and in browsers (WebCrypto's getRandomValues, which needs
// no secure context).

/** Random bytes fetched at once: one call per 256 ids instead of one per id. */
const POOL_BYTES = 16 * 256;
let pool = new Uint8Array(0);
let offset = 0;

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

/** A version 7 UUID for `nowMs` (default now), in its lower-case text form. */
export function uuidV7(nowMs: number = Date.now()): string {
  if (offset + 16 > pool.length) {
    pool = new Uint8Array(POOL_BYTES);
    globalThis.crypto.getRandomValues(pool);
    offset = 0;
  }
  const bytes = pool.subarray(offset, offset + 16);
  offset += 16;
  // 48 bits of milliseconds, big-endian (2^48 ms lasts until the year 10889).
  let ms = Math.max(0, Math.floor(nowMs));
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x70; // version 7
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // the RFC 9562 variant
  let text = "";
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) text += "-";
    text += HEX[bytes[i]!];
  }
  return text;
}
