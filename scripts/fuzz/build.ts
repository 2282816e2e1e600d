// A fuzz case as the bytes a raw client sends: the request message (spoiled
// where the case says), encoded in the protocol's codec, spoiled again as
// bytes, compressed, framed, and sent with the protocol's headers (spoiled
// too). Anything protobuf-es refuses to encode falls back to the seed.
import { toBinary, toJsonString, type Message } from "@bufbuild/protobuf";
import { gzipSync } from "node:zlib";
import type { BodyMut, FuzzCase, HeaderMut, Protocol } from "./cases.js";
import { fieldSlots, hostileFor, random, randomBytes, setAt } from "./hostile.js";
import { authorization, buildEnvelope, varint } from "./signed.js";
import type { FuzzContext, Target } from "./targets.js";
import type { RawRequest } from "./wire.js";

const isJson = (p: Protocol) => p === "connect-json" || p === "grpc-json" || p === "grpc-web-json";
const isConnect = (p: Protocol) => p === "connect-json" || p === "connect-proto";

function contentType(protocol: Protocol, streaming: boolean): string {
  switch (protocol) {
    case "connect-json":
      return streaming ? "application/connect+json" : "application/json";
    case "connect-proto":
      return streaming ? "application/connect+proto" : "application/proto";
    case "grpc":
      return "application/grpc";
    case "grpc-json":
      return "application/grpc+json";
    case "grpc-web":
      return "application/grpc-web+proto";
    case "grpc-web-json":
      return "application/grpc-web+json";
  }
}

/** The last valid envelope per RPC, for exact replays. */
const lastEnvelope = new Map<string, unknown>();

function requestMessage(c: FuzzCase, target: Target, ctx: FuzzContext, rand: () => number): { message: Message; seed: Message } {
  const seed = target.seed(ctx, c.pick);
  const message = target.seed(ctx, c.pick);
  if (target.envelope) {
    const envelopeSeed = target.envelope(ctx, c.pick);
    const valid = buildEnvelope(envelopeSeed, { kind: "none" }, ctx, rand);
    const replayed = c.envelope.kind === "replay" ? lastEnvelope.get(target.name) : undefined;
    const envelope = replayed ?? (c.envelope.kind === "none" || c.envelope.kind === "replay" ? valid : buildEnvelope(envelopeSeed, c.envelope, ctx, rand));
    if (c.envelope.kind === "none") lastEnvelope.set(target.name, valid);
    (message as unknown as Record<string, unknown>).envelope = envelope;
    (seed as unknown as Record<string, unknown>).envelope = valid;
  }
  if (c.message.kind === "field") {
    const slots = fieldSlots(target.method.input);
    const path = slots[c.message.slot % Math.max(1, slots.length)];
    const value = path && hostileFor(path.at(-1)!, c.message.value, rand);
    if (path && value !== undefined) setAt(message, path, value);
  }
  return { message, seed };
}

function encode(target: Target, message: Message, json: boolean): Uint8Array {
  return json ? Buffer.from(toJsonString(target.method.input, message)) : toBinary(target.method.input, message);
}

function deepJson(depth: number): string {
  return `{"a":${"[".repeat(depth)}1${"]".repeat(depth)}}`;
}

/** The message bytes after a byte-level mutation. */
function spoil(bytes: Uint8Array, mut: BodyMut, json: boolean, limit: number, rand: () => number): Uint8Array {
  const at = (fraction: number) => Math.floor((fraction / 1_000_001) * bytes.byteLength);
  switch (mut.kind) {
    case "flip": {
      const copy = Uint8Array.from(bytes);
      for (const bit of mut.bits) if (copy.byteLength > 0) copy[at(bit)]! ^= 1 << bit % 8;
      return copy;
    }
    case "truncate":
      return bytes.subarray(0, at(mut.at));
    case "append":
      return Buffer.concat([bytes, Uint8Array.from(mut.bytes)]);
    case "wire": {
      const prefix: Record<typeof mut.how, number[]> = {
        "huge-varint": [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        "overlong-varint": [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        "wrong-wire-type": [0x0d, 0x01, 0x02, 0x03, 0x04, 0x09, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08],
        "length-past-end": [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01],
        "deep-groups": Array.from({ length: 5000 }, () => 0x7b), // field 15, start group, never ended
        "deep-messages": [],
        "end-group": [0x7c],
      };
      if (mut.how === "deep-messages") {
        let nested: number[] = [];
        for (let i = 0; i < 3000; i++) nested = [0x0a, ...varint(nested.length), ...nested];
        return Buffer.concat([Uint8Array.from(nested), bytes]);
      }
      return Buffer.concat([Uint8Array.from(prefix[mut.how]), bytes]);
    }
    case "json": {
      const text = Buffer.from(bytes).toString();
      const variants: Record<typeof mut.how, () => string | Uint8Array> = {
        bad: () => text.slice(0, Math.max(1, text.length - 1)) + ",",
        deep: () => deepJson(20_000),
        "wrong-type": () => text.replace(/:\s*("[^"]*"|\{|\[|-?\d+)/, ":true"),
        "bad-base64": () => text.replace(/"(header|payload|value|publicKey)":"[^"]*"/, '"$1":"!!not base64!!"'),
        "huge-number": () => text.replace(/^\{/, '{"pageSize":1e400,"fromSequence":"99999999999999999999999",'),
        "non-utf8": () => Buffer.concat([Buffer.from('{"taskId":"'), Buffer.from([0xff, 0xfe, 0xc0]), Buffer.from('"}')]),
        bom: () => `\ufeff${text}`,
        empty: () => "",
        null: () => "null",
        array: () => `[${text}]`,
        "duplicate-keys": () => text.replace(/^\{/, '{"taskId":"a","taskId":"b",'),
      };
      const out = variants[mut.how]();
      return typeof out === "string" ? Buffer.from(out) : out;
    }
    case "size": {
      const goal = mut.how === "limit" ? limit : mut.how === "over" ? limit + 1 + Math.floor(rand() * 1000) : limit * 2;
      const missing = goal - bytes.byteLength;
      if (missing <= 0) return bytes;
      // JSON takes leading whitespace; binary an unknown field 15 holding the rest.
      if (json) return Buffer.concat([Buffer.alloc(missing, 0x20), bytes]);
      let length = missing - 1 - varint(missing).length;
      while (1 + varint(length).length + length > missing) length--;
      while (1 + varint(length).length + length < missing) length++;
      return Buffer.concat([bytes, Uint8Array.from([0x7a, ...varint(length)]), Buffer.alloc(Math.max(0, length))]);
    }
    default:
      return bytes;
  }
}

function frame(flags: number, data: Uint8Array, declared = data.byteLength): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(declared >>> 0, 1);
  return Buffer.concat([head, data]);
}

function framed(bytes: Uint8Array, compressed: boolean, mut: BodyMut, rand: () => number): Uint8Array {
  const flags = compressed ? 1 : 0;
  if (mut.kind !== "frame") return frame(flags, bytes);
  switch (mut.how) {
    case "long":
      return frame(flags, bytes, bytes.byteLength + 1 + Math.floor(rand() * 100));
    case "short":
      return frame(flags, bytes, Math.max(0, bytes.byteLength - 1 - Math.floor(rand() * 10)));
    case "compressed-flag":
      return frame(1, bytes);
    case "trailer-flag":
      return frame(0x80, bytes);
    case "random-flag":
      return frame(Math.floor(rand() * 256), bytes);
    case "two":
      return Buffer.concat([frame(flags, bytes), frame(flags, bytes)]);
    case "none":
      return new Uint8Array(0);
    case "partial-prefix":
      return frame(flags, bytes).subarray(0, 3);
    case "max-length":
      return frame(flags, bytes, 0xffffffff);
  }
}

function applyHeader(headers: Record<string, string>, mut: HeaderMut, protocol: Protocol, streaming: boolean): string | undefined {
  const set = (name: string, value: string | null) => (value === null ? delete headers[name] : (headers[name] = value));
  switch (mut.kind) {
    case "content-type":
      set("content-type", mut.value);
      break;
    case "grpc-timeout":
      set("grpc-timeout", mut.value);
      break;
    case "connect-timeout":
      set("connect-timeout-ms", mut.value);
      break;
    case "encoding":
      set(isConnect(protocol) ? (streaming ? "connect-content-encoding" : "content-encoding") : "grpc-encoding", mut.value);
      break;
    case "accept-encoding":
      set(isConnect(protocol) ? (streaming ? "connect-accept-encoding" : "accept-encoding") : "grpc-accept-encoding", mut.value);
      break;
    case "te":
      set("te", mut.value);
      break;
    case "connect-version":
      set("connect-protocol-version", mut.value);
      break;
    case "junk":
      set("x-fuzz-junk", "j".repeat(mut.size));
      break;
    case "method":
      return mut.value;
  }
  return undefined;
}

/** The bytes and headers of one case. */
export async function buildRequest(c: FuzzCase, target: Target, ctx: FuzzContext, limit: number): Promise<RawRequest> {
  const rand = random(c.noise);
  const protocol = c.protocol;
  const json = isJson(protocol);
  const { message, seed } = requestMessage(c, target, ctx, rand);
  let bytes: Uint8Array;
  try {
    bytes = encode(target, message, json);
  } catch {
    bytes = encode(target, seed, json); // a value the codec cannot write: the seed goes instead
  }
  bytes = spoil(bytes, c.body, json, limit, rand);

  const headers: Record<string, string> = { "content-type": contentType(protocol, target.streaming) };
  const grpcLike = !isConnect(protocol);
  const streamingFrames = grpcLike || target.streaming;
  let compressed = false;
  if (c.body.kind === "gzip") {
    const name = isConnect(protocol) ? (target.streaming ? "connect-content-encoding" : "content-encoding") : "grpc-encoding";
    if (c.body.how === "valid") bytes = gzipSync(bytes);
    if (c.body.how === "bomb") bytes = gzipSync(Buffer.alloc(limit * 4));
    if (c.body.how === "garbage") bytes = randomBytes(rand, 64);
    headers[name] = c.body.how === "unknown-encoding" ? "zstd" : "gzip";
    compressed = true;
  }
  let body: Uint8Array = streamingFrames ? framed(bytes, compressed, c.body, rand) : bytes;
  if (grpcLike) headers.te = "trailers";
  if (isConnect(protocol)) headers["connect-protocol-version"] = "1";
  const auth = target.auth || c.token !== "valid" ? await authorization(c.token, ctx) : undefined;
  if (auth !== undefined) headers.authorization = auth;

  let method = "POST";
  let path = target.path;
  for (const mut of c.headers) method = applyHeader(headers, mut, protocol, target.streaming) ?? method;
  if (c.get && isConnect(protocol) && !target.streaming) {
    // Connect's GET form: the message in the query, no body. Only while the request line and
    // headers stay within the 16 KiB Node's HTTP/1.1 parser reads: past that the request is
    // broken HTTP, refused by the listener before any RPC (see the report's notes on it).
    const params = new URLSearchParams({ encoding: json ? "json" : "proto", connect: "v1", message: json ? Buffer.from(bytes).toString() : Buffer.from(bytes).toString("base64url") });
    if (!json) params.set("base64", "1");
    if (compressed) params.set("compression", headers["content-encoding"] ?? "gzip");
    const headerBytes = Object.entries(headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0);
    if (path.length + params.toString().length + headerBytes < 12 * 1024) {
      path = `${path}?${params.toString()}`;
      method = "GET";
      body = new Uint8Array(0);
      delete headers["content-type"];
    }
  }
  // HTTP/1.1 cannot carry gRPC's trailers: gRPC always goes over HTTP/2, where TE may only be "trailers".
  const http2 = protocol === "grpc" || protocol === "grpc-json" ? true : c.http2;
  if (http2 && headers.te !== undefined && headers.te !== "trailers") delete headers.te;
  return { http2, method, path, headers, body, firstMessageEnough: target.live };
}
