// Bearer tokens for the RPCs that carry no envelope: short-lived EdDSA JWTs
// (RFC 8037) signed by the caller's agent key. iss and sub are the caller's
// agent id, aud the agent called, kid the caller's key id; exp after iat
// and at most 5 minutes after it. A fixed 60 s of clock tolerance applies to
// exp and iat (PROTOCOL.md §5.4), whatever skew the agent allows envelopes. The header also carries the public key as a `jwk`,
// so that an agent pinning keys on first use can check a caller it has not
// pinned yet; the key still has to pass the receiver's trust policy.
import { decodeProtectedHeader, jwtVerify, SignJWT, errors as joseErrors, type JWK } from "jose";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { clip, protocolError } from "../protocol/errors.js";
import { privateKeyObject, publicKeyObject } from "./ed25519.js";
import { fromBase64Url } from "./encoding.js";
import { keyIdOf, publicJwk, type AgentKey } from "./keys.js";

/** The longest a bearer token may live: 5 minutes from `iat` to `exp`. */
export const MAX_TOKEN_LIFETIME_SECONDS = 300;
/** Tolerance for clocks that disagree: a token is taken until exp + 60 s, and with iat up to 60 s ahead. */
export const TOKEN_CLOCK_TOLERANCE_SECONDS = 60;

/** What a bearer token says. */
export interface TokenClaims {
  /** The caller's agent id (`iss` and `sub`). */
  agentId: string;
  /** The agent id of the agent called (`aud`). */
  audience: string;
  /** Seconds until it expires; at most (and by default) {@link MAX_TOKEN_LIFETIME_SECONDS}. */
  lifetimeSeconds?: number;
  /** When it is issued, in milliseconds since the epoch; default now. */
  nowMs?: number;
}

/**
 * Makes a bearer token for the RPCs that carry no envelope (GetTask,
 * ListTasks, Watch, ReadResult): an EdDSA JWT (RFC 8037) signed with the
 * caller's key, its public key in the header (docs/PROTOCOL.md §5.4). Send it
 * as `Authorization: Bearer <token>`.
 */
export async function issueToken(key: AgentKey, claims: TokenClaims): Promise<string> {
  const lifetime = Math.min(claims.lifetimeSeconds ?? MAX_TOKEN_LIFETIME_SECONDS, MAX_TOKEN_LIFETIME_SECONDS);
  const iat = Math.floor((claims.nowMs ?? Date.now()) / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid: key.keyId, jwk: publicJwk(key.publicKey) })
    .setIssuer(claims.agentId)
    .setSubject(claims.agentId)
    .setAudience(claims.audience)
    .setIssuedAt(iat)
    .setExpirationTime(iat + lifetime)
    .sign(privateKeyObject(key.seed));
}

/** Who a verified bearer token speaks for. */
export interface VerifiedCaller {
  /** The caller's agent id. */
  agentId: string;
  /** The key id that signed the token. */
  keyId: string;
  /** The key is trusted only as the first one seen for the id (pinned on first use), not bound by a trust store or registry. */
  firstUse: boolean;
}

/** What {@link verifyToken} checks a token against. */
export interface VerifyOptions {
  /** This agent's id: the required audience. */
  audience: string;
  /** Whose keys are believed for which agent ids. */
  trust: TrustPolicy;
  /** The time to check against, in milliseconds since the epoch; default now. */
  nowMs?: number;
}

const refuse = (message: string) => protocolError(ErrorCode.UNAUTHENTICATED, message);

/**
 * Verifies a bearer token as an agent does: EdDSA signature, audience,
 * `exp` and `iat` (60 s of tolerance, 5 minutes of lifetime at most), and
 * the caller's key against the trust policy.
 *
 * @throws `ConnectError` (`unauthenticated`) saying what is wrong.
 */
export async function verifyToken(token: string, options: VerifyOptions): Promise<VerifiedCaller> {
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw refuse("bearer token is not a JWT");
  }
  if (header.alg !== "EdDSA") throw refuse("bearer token must be signed with EdDSA (Ed25519)");
  if (typeof header.kid !== "string") throw refuse("bearer token has no kid");
  let publicKey = await options.trust.publicKeyFor(header.kid);
  const jwk = header.jwk as JWK | undefined;
  if (publicKey === undefined && jwk?.kty === "OKP" && jwk.crv === "Ed25519" && typeof jwk.x === "string") {
    const embedded = fromBase64Url(jwk.x);
    if (embedded.byteLength === 32 && keyIdOf(embedded) === header.kid) publicKey = embedded;
  }
  if (publicKey === undefined) throw refuse(`no public key known for kid ${clip(header.kid)}`);
  const agentId = (options.nowMs === undefined ? verifiedBefore(token, options.audience, publicKey) : undefined) ?? (await verifySignatureAndClaims(token, publicKey, options));
  const verdict = await options.trust.check(agentId, header.kid, publicKey);
  if (verdict.kind !== "trusted") throw refuse(`agent ${clip(agentId)} with key ${clip(header.kid)} is not trusted`);
  return { agentId, keyId: header.kid, firstUse: verdict.firstUse === true };
}

/** The checks that depend only on the token's bytes, its key and the time: the signature, aud, iss = sub, iat and exp. Returns the caller's agent id. */
async function verifySignatureAndClaims(token: string, publicKey: Uint8Array, options: VerifyOptions): Promise<string> {
  const nowMs = options.nowMs ?? Date.now();
  let payload;
  try {
    ({ payload } = await jwtVerify(token, publicKeyObject(publicKey), {
      algorithms: ["EdDSA"],
      audience: options.audience,
      clockTolerance: TOKEN_CLOCK_TOLERANCE_SECONDS,
      currentDate: new Date(nowMs),
      requiredClaims: ["iss", "sub", "exp", "iat", "aud"],
    }));
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) throw refuse("bearer token has expired");
    if (error instanceof joseErrors.JWTClaimValidationFailed) throw refuse(`bearer token claim ${error.claim} is not acceptable: ${error.reason}`);
    throw refuse("bearer token signature does not verify");
  }
  if (payload.iss !== payload.sub) throw refuse("bearer token iss and sub must both be the caller's agent id");
  // jose checks exp (with the tolerance) but not an iat in the future: a token
  // issued a year ahead would otherwise be good for a year.
  const iat = payload.iat!;
  const exp = payload.exp!;
  if (iat > Math.floor(nowMs / 1000) + TOKEN_CLOCK_TOLERANCE_SECONDS) throw refuse("bearer token iat is in the future");
  if (exp <= iat) throw refuse("bearer token exp must be after iat");
  if (exp - iat > MAX_TOKEN_LIFETIME_SECONDS) throw refuse(`bearer token lifetime exceeds ${MAX_TOKEN_LIFETIME_SECONDS} s`);
  if (options.nowMs === undefined) remember(token, options.audience, publicKey, payload.sub!, (exp + TOKEN_CLOCK_TOLERANCE_SECONDS) * 1000);
  return payload.sub!;
}

// A client sends the same token with every read for minutes (the CLI, the
// console, each Watch it opens: 10,000 opened at once spent a sixth of their
// CPU verifying one token again and again). What the signature and claims
// checks found is kept per token until the token expires, for at most
// VERIFIED_TOKENS tokens; a hit still needs the same audience and the same key
// the trust policy gives for its kid now, and the trust check runs every time.
const VERIFIED_TOKENS = 4096;
const verified = new Map<string, { audience: string; publicKey: Uint8Array; agentId: string; acceptUntilMs: number }>();

function verifiedBefore(token: string, audience: string, publicKey: Uint8Array): string | undefined {
  const hit = verified.get(token);
  if (hit === undefined) return undefined;
  if (hit.acceptUntilMs <= Date.now()) {
    verified.delete(token);
    return undefined; // verified again, it is refused as expired
  }
  return hit.audience === audience && Buffer.compare(hit.publicKey, publicKey) === 0 ? hit.agentId : undefined;
}

function remember(token: string, audience: string, publicKey: Uint8Array, agentId: string, acceptUntilMs: number): void {
  verified.delete(token);
  // Insertion order is nearly expiry order (lifetimes are at most 5 minutes): the oldest go first.
  for (const key of verified.keys()) {
    if (verified.size < VERIFIED_TOKENS) break;
    verified.delete(key);
  }
  verified.set(token, { audience, publicKey, agentId, acceptUntilMs });
}
