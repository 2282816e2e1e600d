// The command line's requester: the user's identity from SYNAPSE_HOME and the
// executors' keys pinned on first use in SYNAPSE_HOME/known-agents.json.
import type { JsonValue } from "@bufbuild/protobuf";
import { join } from "node:path";
import { loadOrCreateIdentity } from "../agent/identity.js";
import { SynapseClient } from "../client/requester.js";
import { parseProtocol } from "../client/transport.js";
import { PinnedKeys } from "../envelope/trust-sources.js";
import { UsageError } from "./args.js";
import { synapseHome } from "./home.js";

export const KNOWN_AGENTS_FILE = "known-agents.json";

/** Options every command that talks to an agent takes. */
export const clientOptions = {
  home: { type: "string" },
  protocol: { type: "string" },
  json: { type: "boolean" },
} as const;

export async function openClient(url: string, values: { home?: string; protocol?: string }): Promise<SynapseClient> {
  const home = synapseHome(values.home);
  const { identity } = await loadOrCreateIdentity(home, { agentName: "synapse command line" });
  return SynapseClient.connect({
    baseUrl: url,
    identity,
    transport: { protocol: parseProtocol(values.protocol) },
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
