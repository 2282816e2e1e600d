// Checking an agent card's AgentCardSignature (A2A section 8.4): a JWS whose
// payload is the card's canonical form, that is its ProtoJSON without
// default values and without `signatures`, with empty strings, lists and
// objects dropped as the A2A SDKs drop them, serialized by JCS (RFC 8785).
// The key comes from the caller's resolver (a trust store), or from the JWKS
// a signature's `jku` names when that is on the card's own origin.
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { base64url, decodeProtectedHeader, flattenedVerify, importJWK, type JWK, type JWSHeaderParameters, type KeyObject, type CryptoKey } from "jose";
import { AgentCardSchema, type AgentCard } from "../../../gen/lf/a2a/v1/a2a_pb.js";
import { A2AClientError } from "./errors.js";

/** A key to check a card signature with: a JWK, or a key object jose takes. */
export type CardKey = JWK | KeyObject | CryptoKey;

/** Finds the key a card signature names; undefined when it is not known. */
export type CardKeyResolver = (header: { kid?: string; jku?: string; alg?: string }) => Promise<CardKey | undefined> | CardKey | undefined;

/** What the check of a card's signatures found. */
export type CardVerdict =
  /** One signature verified, with the key its `kid` named. */
  | { status: "verified"; kid: string; keySource: "resolver" | "jku" }
  /** The card carries no signature. */
  | { status: "unsigned" }
  /** The card is signed, but no key could be found for any of its signatures. */
  | { status: "unverified"; reason: string };

/** RFC 8785 serialization of a JSON value (object keys in UTF-16 code unit order, ECMAScript numbers and strings). */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key]!)}`).join(",")}}`;
}

/** Drops empty strings, nulls, empty lists and empty objects, recursively, as the A2A SDKs do before signing. */
function withoutEmpty(value: JsonValue): JsonValue | undefined {
  if (value === "" || value === null) return undefined;
  if (Array.isArray(value)) {
    const kept = value.map(withoutEmpty).filter((item): item is JsonValue => item !== undefined);
    return kept.length > 0 ? kept : undefined;
  }
  if (typeof value === "object") {
    const kept: Record<string, JsonValue> = {};
    for (const [key, item] of Object.entries(value)) {
      const cleaned = withoutEmpty(item);
      if (cleaned !== undefined) kept[key] = cleaned;
    }
    return Object.keys(kept).length > 0 ? kept : undefined;
  }
  return value;
}

/** The bytes a card's signatures sign: its canonical form without `signatures`. */
export function canonicalCardPayload(card: AgentCard): Uint8Array {
  const json = toJson(AgentCardSchema, card) as Record<string, JsonValue>;
  delete json.signatures;
  return new TextEncoder().encode(canonicalJson(withoutEmpty(json) ?? {}));
}

/** A JWKS fetched from `jku`, only on the card's own origin (a card cannot vouch for itself with a key from elsewhere). */
async function keyFromJku(jku: string, kid: string | undefined, cardUrl: string, fetcher: typeof fetch): Promise<CardKey | undefined> {
  let url: URL;
  try {
    url = new URL(jku, cardUrl);
  } catch {
    return undefined;
  }
  if (url.origin !== new URL(cardUrl).origin) return undefined;
  const response = await fetcher(url, { headers: { Accept: "application/json" } });
  if (!response.ok) return undefined;
  const jwks = (await response.json()) as { keys?: JWK[] };
  const keys = Array.isArray(jwks.keys) ? jwks.keys : [];
  return keys.find((key) => kid === undefined || key.kid === kid);
}

/** What a card's signatures are checked with. */
export interface VerifyCardOptions {
  /** The URL the card was read from (for `jku` keys on its origin). */
  cardUrl: string;
  /** Keys the caller trusts, by the signature's header. */
  keys?: CardKeyResolver;
  /** Follow a same-origin `jku` for keys the resolver does not know; default true. */
  followJku?: boolean;
  /** The fetch a JWKS is read with; default the global one. */
  fetch?: typeof fetch;
}

/**
 * Checks a card's signatures. One signature that verifies makes the card
 * verified; a signature whose key was found and that does not verify makes
 * it refused (the card was changed after it was signed, or signed by
 * another key).
 *
 * @throws {@link A2AClientError} `CardSignatureInvalid` when a signature's key was found and no signature verifies.
 */
export async function verifyCardSignatures(card: AgentCard, options: VerifyCardOptions): Promise<CardVerdict> {
  if (card.signatures.length === 0) return { status: "unsigned" };
  const payload = base64url.encode(canonicalCardPayload(card));
  const fetcher = options.fetch ?? fetch;
  const failures: string[] = [];
  let keysFound = 0;
  for (const signature of card.signatures) {
    let header: JWSHeaderParameters;
    try {
      header = decodeProtectedHeader({ protected: signature.protected, signature: signature.signature });
    } catch (error) {
      failures.push(`a protected header that does not decode (${(error as Error).message})`);
      continue;
    }
    const kid = typeof header.kid === "string" ? header.kid : undefined;
    const jku = typeof header.jku === "string" ? header.jku : undefined;
    const alg = typeof header.alg === "string" ? header.alg : undefined;
    let key = await options.keys?.({ kid, jku, alg });
    let keySource: "resolver" | "jku" = "resolver";
    if (key === undefined && jku !== undefined && options.followJku !== false) {
      key = await keyFromJku(jku, kid, options.cardUrl, fetcher).catch(() => undefined);
      keySource = "jku";
    }
    if (key === undefined) {
      failures.push(`no key known for kid ${JSON.stringify(kid ?? "")}`);
      continue;
    }
    keysFound++;
    try {
      const unprotected = signature.header === undefined ? undefined : (signature.header as JWSHeaderParameters);
      const verifyKey = isJwk(key) ? await importJWK(key, alg) : key;
      await flattenedVerify({ payload, protected: signature.protected, signature: signature.signature, header: unprotected }, verifyKey);
      return { status: "verified", kid: kid ?? "", keySource };
    } catch (error) {
      failures.push(`kid ${JSON.stringify(kid ?? "")}: ${(error as Error).message}`);
    }
  }
  if (keysFound > 0) throw new A2AClientError("CardSignatureInvalid", `the agent card at ${options.cardUrl} has no valid signature: ${failures.join("; ")}`);
  return { status: "unverified", reason: failures.join("; ") };
}

function isJwk(key: CardKey): key is JWK {
  return typeof key === "object" && key !== null && "kty" in key && typeof (key as JWK).kty === "string";
}
