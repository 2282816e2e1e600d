// The writer of the direct encoders (envelope-codec.ts, header-codec.ts):
// they measure a message first, then write its fields into one buffer of
// exactly that size, with no forks, chunks or copies.
import { writeVarint } from "./varint.js";

export class SizedWriter {
  protected readonly bytes: Buffer;
  protected at = 0;

  constructor(
    size: number,
    /** Names the encoder when what it wrote does not fill the size it measured. */
    private readonly encoder: string,
  ) {
    // Not from Buffer's shared pool: kept bytes would hold a whole pool slab.
    this.bytes = Buffer.allocUnsafeSlow(size);
  }

  byte(value: number): void {
    this.bytes[this.at++] = value;
  }

  varint(value: number): void {
    this.at = writeVarint(this.bytes, this.at, value);
  }

  /** A bytes field, left out when empty (proto3). */
  bytesField(tag: number, value: Uint8Array): void {
    if (value.byteLength === 0) return;
    this.byte(tag);
    this.varint(value.byteLength);
    this.bytes.set(value, this.at);
    this.at += value.byteLength;
  }

  /** A string's UTF-8, `byteLength` bytes as Buffer.byteLength measured them. */
  text(value: string, byteLength: number): void {
    if (byteLength === value.length) {
      // ASCII (one byte per code unit): a loop beats a call into Buffer's native writer for short strings.
      const bytes = this.bytes;
      let at = this.at;
      for (let i = 0; i < byteLength; i++) bytes[at++] = value.charCodeAt(i);
      this.at = at;
    } else {
      this.at += this.bytes.write(value, this.at, byteLength, "utf8");
    }
  }

  done(): Uint8Array {
    if (this.at !== this.bytes.byteLength) throw new Error(`${this.encoder} encoder wrote ${this.at} of ${this.bytes.byteLength} bytes`);
    return new Uint8Array(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength);
  }
}
