// Signed material gone wrong: envelopes whose header, payload or signature
// are hostile (most of them validly signed, so that the checks after the
// signature are reached), and bearer tokens of every broken kind.
import { create, toBinary } from "@bufbuild/protobuf";
import { SignJWT } from "jose";
import { EnvelopeSchema, HeaderSchema, type Envelope, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { HeartbeatPayloadSchema } from "../../gen/synapse/v1/payloads_pb.js";
import { privateKeyObject } from "../../src/crypto/ed25519.js";
import { generateKey, publicJwk, type AgentKey } from "../../src/crypto/keys.js";
import { buildHeader, signParts } from "../../src/envelope/seal.js";
import { messageTypeInfo } from "../../src/protocol/message-types.js";
import type { EnvelopeMut, TokenMut } from "./cases.js";
import { hostileString, randomBytes } from "./hostile.js";
import type { EnvelopeSeed, FuzzContext } from "./targets.js";

const stranger = generateKey();
const otherKey = generateKey();

function flip(bytes: Uint8Array, rand: () => number): Uint8Array<ArrayBuffer> {
  const copy = Uint8Array.from(bytes);
  if (copy.byteLength > 0) copy[Math.floor(rand() * copy.byteLength)]! ^= 1 << Math.floor(rand() * 8);
  return copy;
}

const MAX_SECONDS = 2n ** 63n - 1n;

function editHeader(header: Header, mut: EnvelopeMut, ctx: FuzzContext): void {
  if (mut.kind === "header-string") {
    const value = hostileString(mut.value);
    const [outer, inner] = mut.field.split(".") as [string, string | undefined];
    if (inner === undefined) (header as unknown as Record<string, unknown>)[outer] = value;
    else ((header as unknown as Record<string, Record<string, unknown>>)[outer] ??= {})[inner] = value;
  } else if (mut.kind === "time") {
    const now = BigInt(Math.floor(Date.now() / 1000));
    if (mut.which === "sent-max") header.sentAt!.seconds = MAX_SECONDS;
    if (mut.which === "sent-min") header.sentAt!.seconds = -MAX_SECONDS - 1n;
    if (mut.which === "sent-nanos") header.sentAt!.nanos = -1;
    if (mut.which === "sent-future") header.sentAt!.seconds = now + 3600n;
    if (mut.which === "no-sent") header.sentAt = undefined;
    if (mut.which === "expires-max") header.expiresAt!.seconds = MAX_SECONDS;
    if (mut.which === "expires-past") header.expiresAt!.seconds = now - 10n;
    if (mut.which === "expires-nanos") header.expiresAt!.nanos = 2 ** 31 - 1;
  } else if (mut.kind === "type") {
    header.messageType = mut.messageType;
  } else if (mut.kind === "receiver-key") {
    header.receiver!.keyId = mut.other ? otherKey.keyId : ctx.serverKeyId;
  }
}

function payloadBytes(payload: Uint8Array<ArrayBuffer>, how: Extract<EnvelopeMut, { kind: "payload" }>["how"], rand: () => number): Uint8Array<ArrayBuffer> {
  switch (how) {
    case "random":
      return randomBytes(rand, 1 + Math.floor(rand() * 200));
    case "truncate":
      return payload.slice(0, Math.floor(rand() * payload.byteLength));
    case "flip":
      return flip(payload, rand);
    case "empty":
      return new Uint8Array(0);
    case "other-type":
      return toBinary(HeartbeatPayloadSchema, create(HeartbeatPayloadSchema, { activeTasks: 3 }));
    case "huge-varint":
      return Uint8Array.from([...payload, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    case "deep": {
      // Field 1, length-delimited, nested 2000 deep: no payload message has that many levels.
      let bytes: Uint8Array<ArrayBuffer> = new Uint8Array(0);
      for (let i = 0; i < 2000; i++) bytes = Uint8Array.from([0x0a, ...varint(bytes.byteLength), ...bytes]);
      return bytes;
    }
  }
}

export function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/** The seed envelope, spoiled as the mutation says. */
export function buildEnvelope(seed: EnvelopeSeed, mut: EnvelopeMut, ctx: FuzzContext, rand: () => number): Envelope {
  const key: AgentKey = mut.kind === "signature" && mut.how === "stranger" ? stranger : ctx.requester.key;
  const header = buildHeader({ messageType: seed.type, payload: seed.payload, sender: { agentId: ctx.requester.agentId }, receiver: { agentId: ctx.serverAgentId }, taskId: seed.taskId }, key);
  editHeader(header, mut, ctx);
  let headerBytes = toBinary(HeaderSchema, header);
  let payload = toBinary(messageTypeInfo(seed.type)!.payloadSchema, seed.payload);
  if (mut.kind === "payload") payload = payloadBytes(payload, mut.how, rand);
  if (mut.kind === "header-bytes") {
    if (mut.how === "flip") headerBytes = flip(headerBytes, rand);
    if (mut.how === "truncate") headerBytes = headerBytes.slice(0, Math.floor(rand() * headerBytes.byteLength));
    if (mut.how === "random") headerBytes = randomBytes(rand, 1 + Math.floor(rand() * 300));
    if (mut.how === "append") headerBytes = Uint8Array.from([...headerBytes, ...randomBytes(rand, 1 + Math.floor(rand() * 16))]);
  }
  const envelope = signParts(headerBytes, payload, key);
  if (mut.kind !== "signature") return envelope;
  const signature = envelope.signature!;
  switch (mut.how) {
    case "missing":
      return create(EnvelopeSchema, { header: envelope.header, payload: envelope.payload });
    case "short":
      signature.value = signature.value.slice(0, 63);
      break;
    case "algorithm":
      signature.algorithm = 99 as never;
      break;
    case "key-id":
      signature.keyId = otherKey.keyId;
      break;
    case "bad-public-key":
      signature.publicKey = randomBytes(rand, 31);
      break;
    case "other-public-key":
      signature.publicKey = otherKey.publicKey;
      break;
    case "flip-signature":
      signature.value = flip(signature.value, rand);
      break;
    case "flip-header":
      envelope.header = flip(envelope.header, rand);
      break;
    case "flip-payload":
      envelope.payload = flip(envelope.payload, rand);
      break;
    case "stranger":
      break;
  }
  return envelope;
}

const tokens = new Map<TokenMut, { value: string | undefined; madeAtMs: number }>();
const TOKEN_REUSE_MS = 30_000;

function jwt(key: AgentKey, claims: { agentId: string; audience: string; iat: number; exp: number }, withJwk = true): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid: key.keyId, ...(withJwk ? { jwk: publicJwk(key.publicKey) } : {}) })
    .setIssuer(claims.agentId)
    .setSubject(claims.agentId)
    .setAudience(claims.audience)
    .setIssuedAt(claims.iat)
    .setExpirationTime(claims.exp)
    .sign(privateKeyObject(key.seed));
}

async function makeToken(mut: TokenMut, ctx: FuzzContext): Promise<string | undefined> {
  const now = Math.floor(Date.now() / 1000);
  const me = { agentId: ctx.requester.agentId, audience: ctx.serverAgentId };
  const key = ctx.requester.key;
  switch (mut) {
    case "valid":
      return `Bearer ${await ctx.token()}`;
    case "missing":
      return undefined;
    case "garbage":
      return "Bearer abc.def.ghi";
    case "expired":
      return `Bearer ${await jwt(key, { ...me, iat: now - 1000, exp: now - 700 })}`;
    case "future-iat":
      return `Bearer ${await jwt(key, { ...me, iat: now + 3600, exp: now + 3900 })}`;
    case "long-life":
      return `Bearer ${await jwt(key, { ...me, iat: now, exp: now + 3600 })}`;
    case "negative-life":
      return `Bearer ${await jwt(key, { ...me, iat: now, exp: now - 10 })}`;
    case "wrong-audience":
      return `Bearer ${await jwt(key, { ...me, audience: "someone_else", iat: now, exp: now + 60 })}`;
    case "alg-none": {
      const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
      return `Bearer ${part({ alg: "none", typ: "JWT" })}.${part({ iss: me.agentId, sub: me.agentId, aud: me.audience, iat: now, exp: now + 60 })}.`;
    }
    case "bad-signature": {
      const valid = await ctx.token();
      return `Bearer ${valid.slice(0, -4)}${valid.endsWith("AAAA") ? "BBBB" : "AAAA"}`;
    }
    case "unknown-kid":
      return `Bearer ${await jwt(stranger, { ...me, iat: now, exp: now + 60 }, false)}`;
    case "huge":
      return `Bearer ${"A".repeat(6000)}`;
    case "not-bearer":
      return "Basic dXNlcjpwYXNz";
  }
}

/** The Authorization header for a token mutation (tokens are reused for a while: signing is not what is fuzzed). */
export async function authorization(mut: TokenMut, ctx: FuzzContext): Promise<string | undefined> {
  const cached = tokens.get(mut);
  if (cached !== undefined && Date.now() - cached.madeAtMs < TOKEN_REUSE_MS) return cached.value;
  const value = await makeToken(mut, ctx);
  tokens.set(mut, { value, madeAtMs: Date.now() });
  return value;
}
