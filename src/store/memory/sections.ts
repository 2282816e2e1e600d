// Several byte strings in one allocation, and where such allocations come
// from: memory kept for as long as finished work is kept must not be a
// slice of something larger, nor one small allocation of its own each.
export type Allocate = (size: number) => Buffer;

/** Memory of its own, not a slice of Node's pool (whose whole slab a long-lived slice would keep). */
export const allocateAlone: Allocate = (size) => Buffer.allocUnsafeSlow(size);

/** Slabs shared by packed tasks; a larger task gets memory of its own. */
export const SLAB_BYTES = 256 * 1024;

/**
 * Packed tasks laid end to end in shared slabs, freed once every task in
 * one is pruned. One allocation per task would cost more than the task's
 * bytes: an ArrayBuffer and its backing store each, and the holes their
 * malloc chunks leave among the short-lived buffers of requests. Tasks
 * packed together end together and are pruned together, so a slab rarely
 * outlives most of what it holds.
 */
export class Slabs {
  private slab = new ArrayBuffer(0);
  private used = 0;

  readonly allocate: Allocate = (size) => {
    if (size > SLAB_BYTES / 8) return allocateAlone(size);
    if (this.used + size > this.slab.byteLength) {
      this.slab = new ArrayBuffer(SLAB_BYTES);
      this.used = 0;
    }
    const out = Buffer.from(this.slab, this.used, size);
    this.used += size;
    return out;
  };
}

/**
 * Byte strings laid end to end in one buffer of exactly the right size: a
 * count, the end offset of each, then the bytes.
 */
export function packSections(sections: readonly Uint8Array[], allocate: Allocate = allocateAlone): Buffer {
  const head = 4 * (1 + sections.length);
  let size = head;
  for (const section of sections) size += section.byteLength;
  const out = allocate(size);
  out.writeUInt32LE(sections.length, 0);
  let offset = head;
  sections.forEach((section, index) => {
    out.set(section, offset);
    offset += section.byteLength;
    out.writeUInt32LE(offset, 4 * (index + 1));
  });
  return out;
}

/**
 * Bytes kept for long: a view of a larger buffer (a request's whole body,
 * a slab of Node's pool) is copied out, so it does not keep the rest alive.
 */
export function ownBytes(bytes: Uint8Array): Uint8Array {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) return bytes;
  const copy = allocateAlone(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

export function sectionCount(packed: Buffer): number {
  return packed.readUInt32LE(0);
}

/** Section `index` of a packed buffer, as a view (no copy). */
export function section(packed: Buffer, index: number): Buffer {
  const start = index === 0 ? 4 * (1 + sectionCount(packed)) : packed.readUInt32LE(4 * index);
  return packed.subarray(start, packed.readUInt32LE(4 * (index + 1)));
}
