// The writer of the direct encoders (envelope-codec.ts, header-codec.ts,
// server/task-bytes.ts, agent/task-result.ts): they measure a message first,
// then write its fields into one buffer of exactly that size, with no forks,
// chunks or copies.
import { varintSize, writeVarint } from "./varint.js";

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

  /** Bytes as they are (already-encoded content). */
  protected raw(value: Uint8Array): void {
    this.bytes.set(value, this.at);
    this.at += value.byteLength;
  }

  /** A set message field of already-encoded bytes: written even when empty, as toBinary writes a set message. */
  messageField(tag: number, value: Uint8Array): void {
    this.byte(tag);
    this.varint(value.byteLength);
    this.raw(value);
  }

  /** A bytes field, left out when empty (proto3). */
  bytesField(tag: number, value: Uint8Array): void {
    if (value.byteLength === 0) return;
    this.byte(tag);
    this.varint(value.byteLength);
    this.raw(value);
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

// ── tagged fields, for encoders of messages with one-byte tags (fields 1-15) ──

// Tags of the nested messages every such encoder writes: AgentRef's fields, Timestamp's.
const FIRST = 0x0a; // field 1, length-delimited
const SECOND = 0x12; // field 2, length-delimited
const THIRD = 0x1a; // field 3, length-delimited
const SECONDS = 0x08; // Timestamp.seconds, varint
const NANOS = 0x10; // Timestamp.nanos, varint

// What the tagged writer covers; an encoder leaves anything else to toBinary.
export const UINT32_LIMIT = 2 ** 32;
export const INT32_LIMIT = 2 ** 31;

/** A whole number in 0..limit, which protobuf writes as the plain varint FieldWriter writes. */
export const plainBelow = (value: number, limit: number) => Number.isSafeInteger(value) && value >= 0 && value < limit;

/** No unknown fields to carry (an absent message has none). */
export const noUnknown = (message: object | undefined) => message === undefined || !(message as { $unknown?: unknown[] }).$unknown?.length;

/** An agent reference's fields (synapse.v1.AgentRef, or a record of the same three strings). */
export interface AgentFields {
  agentId: string;
  systemId: string;
  keyId: string;
}

/** The size of a length-delimited field with a one-byte tag and `size` bytes of content. */
export const delimited = (size: number) => 1 + varintSize(size) + size;

/** A string field's size (0 when empty); records its byte length, in writing order, for FieldWriter. */
export function sizeText(value: string, texts: number[]): number {
  const length = value.length === 0 ? 0 : Buffer.byteLength(value);
  texts.push(length);
  return length === 0 ? 0 : delimited(length);
}

/** A varint field's size with a one-byte tag (0 when the value is 0: proto3 leaves it out); values below 2^32. */
export const sizeVarintField = (value: number) => (value === 0 ? 0 : 1 + varintSize(value));

export function sizeAgent(agent: AgentFields | undefined, texts: number[]): number {
  if (agent === undefined) return 0;
  return delimited(sizeText(agent.agentId, texts) + sizeText(agent.systemId, texts) + sizeText(agent.keyId, texts));
}

/** A Timestamp field's size from its seconds and nanos (both below 2^32). */
export const sizeTimestamp = (seconds: number, nanos: number) => delimited(sizeVarintField(seconds) + sizeVarintField(nanos));

/** Writes tagged fields, taking the strings' byte lengths in the order the sizing measured them. */
export class FieldWriter extends SizedWriter {
  private nextText = 0;

  constructor(
    size: number,
    private readonly texts: readonly number[],
    encoder: string,
  ) {
    super(size, encoder);
  }

  varintField(tag: number, value: number): void {
    if (value === 0) return;
    this.byte(tag);
    this.varint(value);
  }

  /** A string field, left out when empty (proto3). */
  textField(tag: number, value: string): void {
    const length = this.texts[this.nextText++]!;
    if (length === 0) return;
    this.byte(tag);
    this.varint(length);
    this.text(value, length);
  }

  /** A nested message's tag and length; its size is computed again (cheap) rather than remembered. */
  protected open(tag: number, size: number): void {
    this.byte(tag);
    this.varint(size);
  }

  /** The size of the next `count` string fields, as measured. */
  protected textsSize(count: number): number {
    let size = 0;
    for (let i = this.nextText; i < this.nextText + count; i++) {
      const length = this.texts[i]!;
      if (length > 0) size += delimited(length);
    }
    return size;
  }

  /** A two-string nested message (fields 1 and 2). */
  textPair(tag: number, first: string, second: string): void {
    this.open(tag, this.textsSize(2));
    this.textField(FIRST, first);
    this.textField(SECOND, second);
  }

  agent(tag: number, agent: AgentFields | undefined): void {
    if (agent === undefined) return;
    this.open(tag, this.textsSize(3));
    this.textField(FIRST, agent.agentId);
    this.textField(SECOND, agent.systemId);
    this.textField(THIRD, agent.keyId);
  }

  timestamp(tag: number, seconds: number, nanos: number): void {
    this.open(tag, sizeVarintField(seconds) + sizeVarintField(nanos));
    this.varintField(SECONDS, seconds);
    this.varintField(NANOS, nanos);
  }
}
