// The command line's requester: the user's identity from SYNAPSE_HOME and the
// executors' keys pinned on first use in SYNAPSE_HOME/known-agents.json.
import type { JsonValue } from "@bufbuild/protobuf";
import { join } from "node:path";
import { existsSync, readFileSync } from "node:fs";
import { IDENTITY_FILE, loadOrCreateIdentity } from "../agent/identity.js";
import { GroupClient } from "../client/group-client.js";
import { SynapseClient } from "../client/requester.js";
import { createTransport, parseProtocol, type TransportOptions } from "../client/transport.js";
import { createClient } from "@connectrpc/connect";
import { CapabilitiesService } from "../../gen/synapse/v1/capabilities_pb.js";
import { PinnedKeys } from "../envelope/trust-sources.js";
import { UsageError } from "./args.js";
import { synapseHome } from "./home.js";

export const KNOWN_AGENTS_FILE = "known-agents.json";

/** Options every command that talks to an agent takes. */
export const clientOptions = {
  home: { type: "string" },
  protocol: { type: "string" },
  ca: { type: "string" },
  json: { type: "boolean" },
} as const;

/** How a command calls: the protocol of --protocol, and for https the CA certificates of --ca FILE (PEM) beside Node's own. */
export interface CallValues {
  protocol?: string;
  ca?: string;
}

export function transportOptions(values: CallValues): TransportOptions {
  let ca: Buffer | undefined;
  if (values.ca !== undefined) {
    try {
      ca = readFileSync(values.ca);
    } catch (error) {
      throw new UsageError(`--ca ${values.ca}: ${(error as Error).message}`);
    }
  }
  return { protocol: parseProtocol(values.protocol), ...(ca === undefined ? {} : { ca }) };
}

export async function openClient(url: string, values: CallValues & { home?: string }): Promise<SynapseClient> {
  const transport = transportOptions(values);
  const home = synapseHome(values.home);
  const { identity } = await loadOrCreateIdentity(home, { agentName: "synapse command line" });
  return SynapseClient.connect({
    baseUrl: url,
    identity,
    transport,
    // Like SSH's known_hosts: the agent at the URL the user gave is pinned, whatever its id's form.
    trust: await PinnedKeys.open(join(home, KNOWN_AGENTS_FILE), { firstUse: "any" }),
  });
}

/** Parses repeated `--upload NAME=SHA256:SIZE` (what `synapse upload` prints) into upload references. */
export function parseUploads(values: readonly string[] | undefined): Array<{ name: string; sha256: string; size: number }> {
  return (values ?? []).map((value) => {
    const match = /^([^=]+)=([0-9a-f]{64}):(\d+)$/.exec(value);
    if (match === null) throw new UsageError(`--upload takes NAME=SHA256:SIZE (as \`synapse upload\` prints them), got ${JSON.stringify(value)}`);
    return { name: match[1]!, sha256: match[2]!, size: Number(match[3]) };
  });
}

/** Parses repeated `--set key=value`; values that parse as JSON are JSON, others strings. */
export function parseAssignments(assignments: readonly string[] | undefined): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const assignment of assignments ?? []) {
    const eq = assignment.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set takes key=value, got ${JSON.stringify(assignment)}`);
    const raw = assignment.slice(eq + 1);
    let value: JsonValue;
    try {
      value = JSON.parse(raw) as JsonValue;
    } catch {
      value = raw;
    }
    out[assignment.slice(0, eq)] = value;
  }
  return out;
}

/**
 * A group client signing with the identity in --home: the user's own, or an
 * agent's data dir, so that an agent consents (joins, votes) with its own key.
 * An existing identity is used as it is (its name is not changed).
 */
export async function openGroupClient(url: string, values: CallValues & { home?: string }): Promise<GroupClient> {
  const transport = transportOptions(values);
  const home = synapseHome(values.home);
  const { identity } = await loadOrCreateIdentity(home, existsSync(join(home, IDENTITY_FILE)) ? {} : { agentName: "synapse command line" });
  return GroupClient.connect({
    baseUrl: url,
    identity,
    transport,
    trust: await PinnedKeys.open(join(home, KNOWN_AGENTS_FILE), { firstUse: "any" }),
  });
}

/** The agent id and key id an agent declares at its URL (GetCapabilities). */
export async function agentAt(url: string, values: CallValues): Promise<{ agentId: string; keyId: string }> {
  const { capabilities } = await createClient(CapabilitiesService, createTransport(url, transportOptions(values))).getCapabilities({});
  if (capabilities === undefined) throw new Error(`${url} declared no capabilities`);
  return { agentId: capabilities.agentId, keyId: capabilities.keyId };
}
