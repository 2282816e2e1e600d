// Agents for the group tests: `synapse serve` processes, each with its own
// data dir (so a test can sign as the agent, with the key in it), and
// group clients connected to the host as them.
import { loadOrCreateIdentity, type AgentIdentity } from "../../src/agent/identity.js";
import { GroupClient } from "../../src/client/group-client.js";
import { startServe, type ServeProcess } from "./cli.js";
import { tempDir } from "./server.js";

export interface GroupAgent {
  serve: ServeProcess;
  url: string;
  dataDir: string;
  identity: AgentIdentity;
  /** A group client at the host, signing as this agent. */
  client: GroupClient;
  ref: { agentId: string; keyId: string };
}

/** Starts `count` agents (the first is the host); `args[i]` are extra serve flags for agent i. */
export async function startGroupAgents(count: number, args: string[][] = []): Promise<GroupAgent[]> {
  const dirs = await Promise.all(Array.from({ length: count }, () => tempDir("synapse-group-agent-")));
  const serves = await Promise.all(dirs.map((dir, i) => startServe(["--data-dir", dir, "--store", "memory", ...(args[i] ?? [])], { SYNAPSE_LOG_LEVEL: "warn" })));
  const hostUrl = serves[0]!.url;
  return Promise.all(
    serves.map(async (serve, i) => {
      const { identity } = await loadOrCreateIdentity(dirs[i]!);
      const client = await GroupClient.connect({ baseUrl: hostUrl, identity, retryBaseDelayMs: 50 });
      return { serve, url: serve.url, dataDir: dirs[i]!, identity, client, ref: { agentId: identity.agentId, keyId: identity.key.keyId } };
    }),
  );
}

/** A client at the host for an identity that is not an agent (the user at the command line, say). */
export async function userClient(hostUrl: string): Promise<GroupClient & { identity: AgentIdentity }> {
  const { identity } = await loadOrCreateIdentity(await tempDir("synapse-group-user-"));
  return Object.assign(await GroupClient.connect({ baseUrl: hostUrl, identity, retryBaseDelayMs: 50 }), { identity });
}

export async function stopAll(agents: readonly GroupAgent[]): Promise<void> {
  await Promise.all(agents.map((agent) => agent.serve.stop()));
}

/** Every agent joins `groupId` by accepting an invitation from `coordinator` (weights as given). */
export async function inviteAll(coordinator: GroupClient, groupId: string, members: readonly GroupAgent[], weights: number[] = []): Promise<void> {
  for (const [index, member] of members.entries()) {
    const invited = await coordinator.invite(groupId, member.ref, { weight: weights[index] });
    await member.client.join(groupId, { invitationId: invited.reply.header.replyTo, endpointUrl: member.url });
  }
}
