// Bearer tokens for Watch (and the other envelope-less reads): an EdDSA JWT
// per docs/PROTOCOL.md §5.4, signed with tweetnacl. The header carries the
// public key as `jwk`, because a console's first read may come before the
// agent has pinned its key.
import nacl from "tweetnacl";
import { toBase64Url, utf8 } from "./bytes.js";
import { publicJwk, type ConsoleIdentity } from "./keys.js";

/** The protocol's upper bound on exp - iat. */
export const MAX_TOKEN_LIFETIME_SECONDS = 300;

const encodeJson = (value: object): string => toBase64Url(utf8(JSON.stringify(value)));

export function issueToken(identity: ConsoleIdentity, audience: string, options: { lifetimeSeconds?: number; nowMs?: number } = {}): string {
  const lifetime = Math.min(options.lifetimeSeconds ?? 120, MAX_TOKEN_LIFETIME_SECONDS);
  const iat = Math.floor((options.nowMs ?? Date.now()) / 1000);
  const header = { alg: "EdDSA", typ: "JWT", kid: identity.keyId, jwk: publicJwk(identity.publicKey) };
  const claims = { iss: identity.agentId, sub: identity.agentId, aud: audience, iat, exp: iat + lifetime };
  const signingInput = `${encodeJson(header)}.${encodeJson(claims)}`;
  const signature = nacl.sign.detached(utf8(signingInput), identity.secretKey);
  return `${signingInput}.${toBase64Url(signature)}`;
}
