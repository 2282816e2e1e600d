// An A2A agent's card: read from /.well-known/agent-card.json (or the card
// URL given), parsed as lf.a2a.v1.AgentCard, its signatures checked, and
// the interface to call chosen from supportedInterfaces.
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { AgentCardSchema, type AgentCard, type AgentInterface } from "../../../gen/lf/a2a/v1/a2a_pb.js";
import { verifyCardSignatures, type CardKeyResolver, type CardVerdict } from "./card-signature.js";
import { A2AClientError } from "./errors.js";

/** Where A2A agents publish their card (A2A section 8.2). */
export const WELL_KNOWN_CARD_PATH = "/.well-known/agent-card.json";

/** The A2A version this client speaks, sent as the A2A-Version header. */
export const A2A_VERSION = "1.0";

/** The bindings the specification defines. */
export type A2ABinding = "GRPC" | "JSONRPC" | "HTTP+JSON";

/** The binding preference when the caller names none. */
export const DEFAULT_BINDINGS: readonly A2ABinding[] = ["GRPC", "JSONRPC", "HTTP+JSON"];

/** The largest card read, in bytes. */
const MAX_CARD_BYTES = 1024 * 1024;

/**
 * Where an agent URL's card may be: the URL itself when it names a .json
 * document; else the well-known path under the URL's own path (agents served
 * under a prefix), then at its origin (where the specification puts it).
 */
export function cardUrlsFor(agentUrl: string): string[] {
  const url = new URL(agentUrl);
  if (url.pathname.endsWith(".json")) return [url.toString()];
  const atOrigin = new URL(WELL_KNOWN_CARD_PATH, url.origin).toString();
  const path = url.pathname.replace(/\/+$/, "");
  if (path === "") return [atOrigin];
  return [new URL(`${path}${WELL_KNOWN_CARD_PATH}`, url.origin).toString(), atOrigin];
}

/** How a card is read and checked. */
export interface ReadCardOptions {
  /** Keys trusted for card signatures (see {@link CardKeyResolver}). */
  cardKeys?: CardKeyResolver;
  /** Refuse a card that is unsigned or whose signature could not be checked; default false. */
  requireSignedCard?: boolean;
  /** The fetch the card (and a same-origin JWKS) is read with; default the global one. */
  fetch?: typeof fetch;
  /** Headers sent with the card request (credentials, say). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** A card read and checked. */
export interface ReadCard {
  card: AgentCard;
  cardUrl: string;
  signature: CardVerdict;
}

/**
 * Reads and checks an agent's card.
 *
 * @throws {@link A2AClientError} `CardInvalid` (unreachable, not JSON, not an
 * AgentCard), `CardSignatureInvalid`, or `CardUnverified` with `requireSignedCard`.
 */
export async function readAgentCard(agentUrl: string, options: ReadCardOptions = {}): Promise<ReadCard> {
  const candidates = cardUrlsFor(agentUrl);
  const fetcher = options.fetch ?? fetch;
  let response: Response | undefined;
  let cardUrl = candidates[0]!;
  for (const candidate of candidates) {
    cardUrl = candidate;
    try {
      response = await fetcher(cardUrl, { headers: { Accept: "application/json", "A2A-Version": A2A_VERSION, ...options.headers }, signal: options.signal });
    } catch (error) {
      throw new A2AClientError("CardInvalid", `could not read the agent card at ${cardUrl}: ${(error as Error).message}`, {}, { cause: error });
    }
    if (response.ok) break;
    await response.body?.cancel().catch(() => undefined);
    // Only a card that is not there sends us to the next place; any other refusal is the answer.
    if (response.status !== 404) break;
  }
  if (!response!.ok) {
    throw new A2AClientError("CardInvalid", `the agent card at ${cardUrl} answered HTTP ${response!.status}`, { code: response!.status });
  }
  const declared = Number(response!.headers.get("content-length"));
  if (declared > MAX_CARD_BYTES) throw new A2AClientError("CardInvalid", `the agent card at ${cardUrl} is larger than ${MAX_CARD_BYTES} bytes`);
  const text = await response!.text();
  if (text.length > MAX_CARD_BYTES) throw new A2AClientError("CardInvalid", `the agent card at ${cardUrl} is larger than ${MAX_CARD_BYTES} bytes`);
  let card: AgentCard;
  try {
    card = fromJson(AgentCardSchema, JSON.parse(text) as JsonValue, { ignoreUnknownFields: true });
  } catch (error) {
    throw new A2AClientError("CardInvalid", `the document at ${cardUrl} is not an A2A v1.0 agent card: ${(error as Error).message}`, {}, { cause: error });
  }
  if (card.supportedInterfaces.length === 0) throw new A2AClientError("CardInvalid", `the agent card at ${cardUrl} lists no supportedInterfaces (not an A2A v1.0 card)`);
  const signature = await verifyCardSignatures(card, { cardUrl, keys: options.cardKeys, fetch: fetcher });
  if (options.requireSignedCard && signature.status !== "verified") {
    throw new A2AClientError("CardUnverified", `the agent card at ${cardUrl} is ${signature.status === "unsigned" ? "unsigned" : `signed, but its signature could not be checked (${signature.reason})`}`);
  }
  return { card, cardUrl, signature };
}

/** Whether an interface serves an A2A version this client speaks (1.x; a missing version is taken as 1.0 only when the card says nothing else). */
function speaksOurVersion(entry: AgentInterface): boolean {
  return entry.protocolVersion === "" || entry.protocolVersion.split(".")[0] === A2A_VERSION.split(".")[0];
}

/**
 * The interface to call: the first binding in `preference` that the card
 * lists for A2A 1.x (the card's own order breaks ties).
 *
 * @throws {@link A2AClientError} `NoSupportedInterface`.
 */
export function chooseInterface(card: AgentCard, preference: readonly A2ABinding[] = DEFAULT_BINDINGS): AgentInterface & { protocolBinding: A2ABinding } {
  for (const binding of preference) {
    const entry = card.supportedInterfaces.find((candidate) => candidate.protocolBinding.toUpperCase() === binding && speaksOurVersion(candidate));
    if (entry !== undefined) return { ...entry, protocolBinding: binding };
  }
  const offered = card.supportedInterfaces.map((entry) => `${entry.protocolBinding} ${entry.protocolVersion}`).join(", ");
  throw new A2AClientError("NoSupportedInterface", `agent ${JSON.stringify(card.name)} serves no A2A 1.x interface over ${preference.join(", ")} (it offers ${offered || "none"})`);
}
