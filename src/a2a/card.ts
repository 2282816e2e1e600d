// The A2A agent card (GET /.well-known/agent-card.json): who the agent is,
// the bindings served on this port, what works (capabilities), its task
// types as skills (their JSON schemas in the task-schemas extension), how
// callers authenticate, and a JWS signature (RFC 7515, EdDSA) over the
// card's RFC 8785 canonical form, made with the agent's Ed25519 key. The
// public key is served as a JWK set at /.well-known/jwks.json (the
// signature's jku); its kid is the key id Synapse uses everywhere.
import { A2A_JSONRPC_PATH } from "./jsonrpc.js";
import { A2A_REST_PATH } from "./rest.js";
import { create, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { FlattenedSign } from "jose";
import { AgentCardSchema, AgentCardSignatureSchema, type AgentCard } from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { privateKeyObject } from "../crypto/ed25519.js";
import { publicJwk, type AgentKey } from "../crypto/keys.js";

export const AGENT_CARD_PATH = "/.well-known/agent-card.json";
export const JWKS_PATH = "/.well-known/jwks.json";
export const A2A_PROTOCOL_VERSION = "1.0";
/** The extension whose params give each skill's input and output JSON schema. */
export const TASK_SCHEMAS_EXTENSION = "urn:synapse:a2a:task-schemas:v1";

/** The A2A bindings one server can serve, by the card's protocolBinding names. */
export type A2ABinding = "JSONRPC" | "HTTP+JSON" | "GRPC";

export interface AgentCardOptions {
  capabilities: AgentCapabilities;
  key: AgentKey;
  /** The server's base URL as clients reach it (no trailing slash). */
  baseUrl: string;
  /** The bindings served, the preferred first. */
  bindings: readonly A2ABinding[];
  /** Whether callers without credentials are admitted (then no security requirement is declared). */
  open: boolean;
  /** What works: each true only when served. */
  streaming: boolean;
  pushNotifications: boolean;
  extendedAgentCard: boolean;
  version: string;
  description?: string;
}

const BEARER_DESCRIPTION =
  "An EdDSA (Ed25519) JWT, RFC 8037, signed with the caller's agent key: iss and sub the caller's agent id, aud this agent's id, kid the caller's key id " +
  "(RFC 7638 thumbprint), a jwk header with the public key, exp at most 5 minutes after iat. `synapse token` makes one.";

const bindingPath: Record<A2ABinding, string> = { JSONRPC: A2A_JSONRPC_PATH, "HTTP+JSON": A2A_REST_PATH, GRPC: "" };

/**
 * Where a binding is reached: the HTTP ones at their path; gRPC as the
 * authority alone (host:port), the target gRPC clients (grpc-js) dial.
 */
function interfaceUrl(baseUrl: string, binding: A2ABinding): string {
  if (binding !== "GRPC") return `${baseUrl}${bindingPath[binding]}`;
  return baseUrl.replace(/^[a-z]+:\/\//i, "");
}

const parseSchema = (text: string): JsonValue => (text ? (JSON.parse(text) as JsonValue) : { type: "object" });

/** The card without its signature. */
export function unsignedAgentCard(options: AgentCardOptions): AgentCard {
  const { capabilities } = options;
  const taskTypes = capabilities.supportedTaskTypes;
  const name = capabilities.agentName || capabilities.agentId;
  return create(AgentCardSchema, {
    name,
    description:
      options.description ??
      `${name}: a Synapse agent (${taskTypes.map((taskType) => taskType.type).join(", ") || "no task types"}). Each task is durable and has an executor-signed event log.`,
    supportedInterfaces: options.bindings.map((binding) => ({ url: interfaceUrl(options.baseUrl, binding), protocolBinding: binding, protocolVersion: A2A_PROTOCOL_VERSION })),
    provider: { organization: capabilities.systemId || name, url: options.baseUrl },
    version: options.version,
    capabilities: {
      streaming: options.streaming,
      pushNotifications: options.pushNotifications,
      extendedAgentCard: options.extendedAgentCard,
      extensions: [
        {
          uri: TASK_SCHEMAS_EXTENSION,
          description: "params.skills maps each skill id to its task type's inputSchema and outputSchema (JSON Schema draft-07)",
          required: false,
          params: {
            skills: Object.fromEntries(taskTypes.map((taskType) => [taskType.type, { inputSchema: parseSchema(taskType.inputSchema), outputSchema: parseSchema(taskType.outputSchema) }])),
          } as JsonObject,
        },
      ],
    },
    securitySchemes: { bearer: { scheme: { case: "httpAuthSecurityScheme", value: { scheme: "Bearer", bearerFormat: "JWT", description: BEARER_DESCRIPTION } } } },
    securityRequirements: options.open ? [] : [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: ["application/json", "text/plain"],
    defaultOutputModes: ["application/json", "text/plain"],
    skills: taskTypes.map((taskType) => ({
      id: taskType.type,
      name: taskType.name || taskType.type,
      description: taskType.description || taskType.type,
      tags: [taskType.type, ...taskType.capabilities],
      inputModes: ["application/json", "text/plain"],
      outputModes: ["application/json"],
    })),
  });
}

/** RFC 8785 (JCS) canonical JSON: keys sorted by UTF-16 code units, no whitespace, ECMAScript number and string forms. */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key]!)}`).join(",")}}`;
}

/**
 * The JSON with empty strings, lists and objects left out (recursively): the
 * defaults a card omits before it is signed, as the A2A SDKs (JavaScript,
 * Python) omit them when they verify. Every field the spec requires is
 * non-empty in our card, so this removes nothing it requires.
 */
export function withoutEmpty(value: JsonValue): JsonValue | undefined {
  if (value === "" || value === null) return undefined;
  if (Array.isArray(value)) {
    const kept = value.map(withoutEmpty).filter((item): item is JsonValue => item !== undefined);
    return kept.length > 0 ? kept : undefined;
  }
  if (typeof value === "object") {
    const kept = Object.entries(value)
      .map(([key, item]) => [key, withoutEmpty(item)] as const)
      .filter((entry): entry is readonly [string, JsonValue] => entry[1] !== undefined);
    return kept.length > 0 ? Object.fromEntries(kept) : undefined;
  }
  return value;
}

/** The bytes the card's signatures cover: its ProtoJSON form without signatures and defaults, canonicalized (RFC 8785). */
export function cardSigningPayload(card: AgentCard): Uint8Array {
  const json = toJson(AgentCardSchema, card) as JsonObject;
  delete json.signatures;
  return new TextEncoder().encode(canonicalJson(withoutEmpty(json) ?? {}));
}

/** The card, signed: one AgentCardSignature (EdDSA, kid the agent's key id, jku the JWK set). */
export async function signedAgentCard(options: AgentCardOptions): Promise<AgentCard> {
  const card = unsignedAgentCard(options);
  const jws = await new FlattenedSign(cardSigningPayload(card))
    .setProtectedHeader({ alg: "EdDSA", typ: "JOSE", kid: options.key.keyId, jku: `${options.baseUrl}${JWKS_PATH}` })
    .sign(privateKeyObject(options.key.seed));
  card.signatures = [create(AgentCardSignatureSchema, { protected: jws.protected!, signature: jws.signature })];
  return card;
}

/** The JWK set the card's jku names: the agent's Ed25519 public key. */
export function agentJwks(key: AgentKey): JsonObject {
  return { keys: [{ ...publicJwk(key.publicKey), kid: key.keyId, alg: "EdDSA", use: "sig" }] };
}
