// Hostile values for any protobuf field, found by reflection: strings that
// are huge or malformed, integers at their limits, unknown enum numbers,
// Timestamps no clock can show, deep or wide JSON where a Struct goes.
import { create, ScalarType, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import type { HostileValue } from "./cases.js";

/** A small deterministic PRNG (mulberry32), so a case's random bytes follow from its noise. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomBytes(rand: () => number, length: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(rand() * 256);
  return bytes;
}

export function hostileString(value: HostileValue): string {
  switch (value) {
    case "empty":
      return "";
    case "long":
      return "l".repeat(8000);
    case "huge":
      return "h".repeat(66_000);
    case "unicode":
      return "ünï😀\u202e".repeat(400);
    case "control":
      return "\u0000\u0001\u001f\"\\".repeat(200);
    case "lone-surrogate":
      return "a\ud800b\udc00c";
    default:
      return "x";
  }
}

function deepJson(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { leaf: 1 };
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

function jsonValue(value: HostileValue): unknown {
  switch (value) {
    case "deep-json":
      return deepJson(300);
    case "many":
      return Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, i]));
    case "huge":
    case "long":
    case "unicode":
    case "control":
    case "lone-surrogate":
      return { text: hostileString(value) };
    case "max":
      return { n: Number.MAX_VALUE };
    default:
      return {};
  }
}

const INT_LIMITS: Partial<Record<ScalarType, [number | bigint, number | bigint]>> = {
  [ScalarType.INT32]: [-(2 ** 31), 2 ** 31 - 1],
  [ScalarType.SINT32]: [-(2 ** 31), 2 ** 31 - 1],
  [ScalarType.SFIXED32]: [-(2 ** 31), 2 ** 31 - 1],
  [ScalarType.UINT32]: [0, 2 ** 32 - 1],
  [ScalarType.FIXED32]: [0, 2 ** 32 - 1],
  [ScalarType.INT64]: [-(2n ** 63n), 2n ** 63n - 1n],
  [ScalarType.SINT64]: [-(2n ** 63n), 2n ** 63n - 1n],
  [ScalarType.SFIXED64]: [-(2n ** 63n), 2n ** 63n - 1n],
  [ScalarType.UINT64]: [0n, 2n ** 64n - 1n],
  [ScalarType.FIXED64]: [0n, 2n ** 64n - 1n],
};

function scalarValue(scalar: ScalarType, value: HostileValue, rand: () => number): unknown {
  if (scalar === ScalarType.STRING) return hostileString(value);
  if (scalar === ScalarType.BYTES) return value === "huge" ? new Uint8Array(66_000) : value === "empty" ? new Uint8Array(0) : randomBytes(rand, Math.floor(rand() * 3000));
  if (scalar === ScalarType.BOOL) return value !== "empty";
  if (scalar === ScalarType.DOUBLE || scalar === ScalarType.FLOAT) return value === "max" ? Infinity : value === "min" ? -Infinity : value === "minus-one" ? -1 : NaN;
  const [min, max] = INT_LIMITS[scalar] ?? [0, 0];
  if (value === "min") return min;
  if (value === "minus-one") return typeof min === "bigint" ? (min < 0n ? -1n : max) : min < 0 ? -1 : max;
  return max;
}

function messageValue(desc: DescMessage, value: HostileValue): unknown {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      if (value === "timestamp-min" || value === "min") return create(desc, { seconds: -(2n ** 63n) } as never);
      if (value === "nanos-out") return create(desc, { seconds: 1n, nanos: -1 } as never);
      return create(desc, { seconds: 2n ** 63n - 1n, nanos: 999_999_999 } as never);
    case "google.protobuf.Duration":
      return create(desc, (value === "minus-one" || value === "min" ? { seconds: -(2n ** 63n) } : { seconds: 2n ** 63n - 1n, nanos: value === "nanos-out" ? 2 ** 31 - 1 : 0 }) as never);
    case "google.protobuf.Struct":
      return jsonValue(value);
    case "google.protobuf.Value":
      return jsonValue(value);
    case "google.protobuf.ListValue":
      return Array.from({ length: value === "many" ? 2000 : 1 }, () => jsonValue(value));
    default:
      // Wrappers (google.protobuf.StringValue, ...) are plain values in protobuf-es: leave them alone.
      return desc.typeName.startsWith("google.protobuf.") ? undefined : create(desc);
  }
}

function elementValue(field: DescField, value: HostileValue, rand: () => number): unknown {
  if (field.fieldKind !== "list" && field.fieldKind !== "map") return undefined;
  const kind = field.fieldKind === "list" ? field.listKind : field.mapKind;
  if (kind === "message") return messageValue(field.message!, value);
  if (kind === "enum") return 999;
  return scalarValue(field.scalar!, value === "many" ? "long" : value, rand);
}

/** A hostile value for the field, or undefined when the kind makes no sense for it. */
export function hostileFor(field: DescField, value: HostileValue, rand: () => number): unknown {
  switch (field.fieldKind) {
    case "scalar":
      return scalarValue(field.scalar, value, rand);
    case "enum":
      return value === "max" ? 2 ** 31 - 1 : value === "min" ? -(2 ** 31) : value === "minus-one" ? -1 : 999;
    case "message":
      return messageValue(field.message, value);
    case "list": {
      const element = elementValue(field, value, rand);
      if (element === undefined || value === "empty") return [];
      return Array.from({ length: value === "many" ? 1000 : 3 }, () => element);
    }
    case "map": {
      const element = elementValue(field, value, rand);
      if (element === undefined || value === "empty") return {};
      const key = (i: number) => (field.mapKey === ScalarType.STRING ? `k${i}${value === "huge" ? "h".repeat(100) : ""}` : i);
      return Object.fromEntries(Array.from({ length: value === "many" ? 1000 : 3 }, (_, i) => [key(i), element]));
    }
  }
}

/** Paths to every field down to `depth` levels (skipping URLs, which would make the server call out). */
export function fieldSlots(desc: DescMessage, depth = 3, prefix: DescField[] = []): DescField[][] {
  const slots: DescField[][] = [];
  for (const field of desc.fields) {
    if (field.name.endsWith("_url")) continue;
    const path = [...prefix, field];
    slots.push(path);
    if (field.fieldKind === "message" && depth > 1 && !field.message.typeName.startsWith("google.protobuf.")) {
      slots.push(...fieldSlots(field.message, depth - 1, path));
    }
  }
  return slots;
}

/** Sets the field at `path` in `message` (creating the messages on the way), oneofs included. */
export function setAt(message: Message, path: DescField[], value: unknown): void {
  let target = message as unknown as Record<string, unknown>;
  for (const [i, field] of path.entries()) {
    const last = i === path.length - 1;
    if (field.oneof !== undefined) {
      const current = target[field.oneof.localName] as { case?: string; value?: unknown } | undefined;
      const next = last ? value : current?.case === field.localName ? current.value : create((field as DescField & { message: DescMessage }).message);
      target[field.oneof.localName] = { case: field.localName, value: next };
      target = next as Record<string, unknown>;
    } else if (last) {
      target[field.localName] = value;
    } else {
      target[field.localName] ??= create((field as DescField & { message: DescMessage }).message);
      target = target[field.localName] as Record<string, unknown>;
    }
  }
}
