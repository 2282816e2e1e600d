// What one fuzz case is, as plain data fast-check generates (and prints when
// a case fails): which RPC, which protocol, and how the request is spoiled at
// each layer (message fields, the signed envelope, the bearer token, the body
// bytes and framing, the HTTP headers). build.ts turns a case into bytes.
import fc from "fast-check";

export const PROTOCOLS = ["connect-json", "connect-proto", "grpc", "grpc-json", "grpc-web", "grpc-web-json"] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/** The four protocols of the brief, for reports: the codec variants of gRPC and gRPC-web count under them. */
export function protocolFamily(protocol: Protocol): string {
  return { "connect-json": "Connect JSON", "connect-proto": "Connect binary", grpc: "gRPC", "grpc-json": "gRPC", "grpc-web": "gRPC-web", "grpc-web-json": "gRPC-web" }[protocol];
}

export const HOSTILE_VALUES = [
  "empty", "long", "huge", "unicode", "control", "lone-surrogate", "max", "min", "minus-one", "unknown-enum", "random-bytes", "many", "deep-json", "timestamp-max", "timestamp-min", "nanos-out",
] as const;
export type HostileValue = (typeof HOSTILE_VALUES)[number];

export type MessageMut = { kind: "seed" } | { kind: "field"; slot: number; value: HostileValue };

export const HEADER_FIELDS = ["messageId", "protocolVersion", "sender.agentId", "sender.keyId", "receiver.agentId", "receiver.keyId", "taskId", "replyTo", "idempotencyKey", "payloadType", "correlationId"] as const;

export type EnvelopeMut =
  | { kind: "none" }
  | { kind: "replay" }
  | { kind: "header-string"; field: (typeof HEADER_FIELDS)[number]; value: HostileValue }
  | { kind: "time"; which: "sent-max" | "sent-min" | "sent-nanos" | "expires-max" | "expires-past" | "sent-future" | "no-sent" | "expires-nanos" }
  | { kind: "type"; messageType: number }
  | { kind: "payload"; how: "random" | "truncate" | "flip" | "empty" | "other-type" | "huge-varint" | "deep" }
  | { kind: "header-bytes"; how: "flip" | "truncate" | "random" | "append" }
  | { kind: "signature"; how: "missing" | "short" | "algorithm" | "key-id" | "bad-public-key" | "other-public-key" | "flip-signature" | "flip-header" | "flip-payload" | "stranger" }
  | { kind: "receiver-key"; other: boolean };

export const TOKEN_MUTS = ["valid", "missing", "garbage", "expired", "future-iat", "long-life", "negative-life", "wrong-audience", "alg-none", "bad-signature", "unknown-kid", "huge", "not-bearer"] as const;
export type TokenMut = (typeof TOKEN_MUTS)[number];

export type BodyMut =
  | { kind: "exact" }
  | { kind: "flip"; bits: number[] }
  | { kind: "truncate"; at: number }
  | { kind: "append"; bytes: number[] }
  | { kind: "wire"; how: "huge-varint" | "overlong-varint" | "wrong-wire-type" | "length-past-end" | "deep-groups" | "deep-messages" | "end-group" }
  | { kind: "json"; how: "bad" | "deep" | "wrong-type" | "bad-base64" | "huge-number" | "non-utf8" | "bom" | "empty" | "null" | "array" | "duplicate-keys" }
  | { kind: "frame"; how: "long" | "short" | "compressed-flag" | "trailer-flag" | "random-flag" | "two" | "none" | "partial-prefix" | "max-length" }
  | { kind: "size"; how: "limit" | "over" | "double" }
  | { kind: "gzip"; how: "valid" | "bomb" | "garbage" | "unknown-encoding" };

export type HeaderMut =
  | { kind: "content-type"; value: string | null }
  | { kind: "grpc-timeout"; value: string }
  | { kind: "connect-timeout"; value: string }
  | { kind: "encoding"; value: string }
  | { kind: "accept-encoding"; value: string }
  | { kind: "te"; value: string | null }
  | { kind: "connect-version"; value: string | null }
  | { kind: "junk"; size: number }
  | { kind: "method"; value: "GET" | "PUT" | "DELETE" };

export interface FuzzCase {
  target: number;
  pick: number;
  protocol: Protocol;
  http2: boolean;
  /** Connect's GET form (query parameters instead of a body). */
  get: boolean;
  message: MessageMut;
  envelope: EnvelopeMut;
  token: TokenMut;
  body: BodyMut;
  headers: HeaderMut[];
  /** Seeds the random bytes some mutations use. */
  noise: number;
}

const hostile = fc.constantFrom(...HOSTILE_VALUES);
const fraction = fc.integer({ min: 0, max: 1_000_000 });

const messageMut: fc.Arbitrary<MessageMut> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: "seed" as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("field" as const), slot: fc.nat(), value: hostile }) },
);

const envelopeMut: fc.Arbitrary<EnvelopeMut> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: "none" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "replay" as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("header-string" as const), field: fc.constantFrom(...HEADER_FIELDS), value: hostile }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("time" as const), which: fc.constantFrom("sent-max", "sent-min", "sent-nanos", "expires-max", "expires-past", "sent-future", "no-sent", "expires-nanos") }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("type" as const), messageType: fc.oneof(fc.integer({ min: 0, max: 18 }), fc.constantFrom(100, 101, 102, 999, -1, 2 ** 31 - 1)) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("payload" as const), how: fc.constantFrom("random", "truncate", "flip", "empty", "other-type", "huge-varint", "deep") }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("header-bytes" as const), how: fc.constantFrom("flip", "truncate", "random", "append") }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("signature" as const),
      how: fc.constantFrom("missing", "short", "algorithm", "key-id", "bad-public-key", "other-public-key", "flip-signature", "flip-header", "flip-payload", "stranger"),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("receiver-key" as const), other: fc.boolean() }) },
);

const bodyMut: fc.Arbitrary<BodyMut> = fc.oneof(
  { weight: 8, arbitrary: fc.constant({ kind: "exact" as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("flip" as const), bits: fc.array(fraction, { minLength: 1, maxLength: 8 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("truncate" as const), at: fraction }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("append" as const), bytes: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 32 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("wire" as const), how: fc.constantFrom("huge-varint", "overlong-varint", "wrong-wire-type", "length-past-end", "deep-groups", "deep-messages", "end-group") }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("json" as const), how: fc.constantFrom("bad", "deep", "wrong-type", "bad-base64", "huge-number", "non-utf8", "bom", "empty", "null", "array", "duplicate-keys") }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("frame" as const), how: fc.constantFrom("long", "short", "compressed-flag", "trailer-flag", "random-flag", "two", "none", "partial-prefix", "max-length") }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("size" as const), how: fc.constantFrom("limit", "over", "double") }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("gzip" as const), how: fc.constantFrom("valid", "bomb", "garbage", "unknown-encoding") }) },
);

const headerMut: fc.Arbitrary<HeaderMut> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("content-type" as const),
      value: fc.constantFrom(
        null, "", "text/plain", "application/json", "application/proto", "application/connect+json", "application/connect+proto", "application/grpc", "application/grpc+json", "application/grpc+thrift",
        "application/grpc-web", "application/grpc-web+json", "application/grpc-web-text", "application/GRPC", "application/json; charset=utf-16", "application/proto; charset=utf-8", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded",
      ),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("grpc-timeout" as const), value: fc.constantFrom("1S", "0n", "1n", "abc", "-1S", "99999999H", "1", "100000000S", "1.5S", "", "9999999999999999999m") }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("connect-timeout" as const), value: fc.constantFrom("abc", "-5", "0", "1", "99999999999999999999", "1e3", "", "10000000000") }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("encoding" as const), value: fc.constantFrom("gzip", "br", "identity", "deflate", "snappy", "gzip, br", "", "x".repeat(300)) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("accept-encoding" as const), value: fc.constantFrom("gzip", "br", "identity", "zstd", "*", "", "gzip;q=0") }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("te" as const), value: fc.constantFrom(null, "gzip", "") }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("connect-version" as const), value: fc.constantFrom(null, "2", "", "v1") }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("junk" as const), size: fc.constantFrom(1, 100, 4000, 8000) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("method" as const), value: fc.constantFrom("GET" as const, "PUT" as const, "DELETE" as const) }) },
);

/** Cases over `targets` RPCs. */
export function fuzzCase(targets: number): fc.Arbitrary<FuzzCase> {
  return fc.record({
    target: fc.integer({ min: 0, max: targets - 1 }),
    pick: fc.nat({ max: 1000 }),
    protocol: fc.constantFrom(...PROTOCOLS),
    http2: fc.boolean(),
    get: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    message: messageMut,
    envelope: envelopeMut,
    token: fc.oneof({ weight: 6, arbitrary: fc.constant("valid" as const) }, { weight: 4, arbitrary: fc.constantFrom(...TOKEN_MUTS) }),
    body: bodyMut,
    headers: fc.oneof({ weight: 3, arbitrary: fc.constant([] as HeaderMut[]) }, { weight: 2, arbitrary: fc.array(headerMut, { minLength: 1, maxLength: 3 }) }),
    noise: fc.integer(),
  });
}
