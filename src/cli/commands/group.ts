// `synapse group create|show|list|add|join|role|leave|remove|dissolve|watch|task`:
// groups hosted by an agent (A2N). Every change is a message signed with
// the identity in --home (default SYNAPSE_HOME): a member joins or leaves
// with its own key, for an agent the key in its data dir.
import { toJson } from "@bufbuild/protobuf";
import { GroupRole } from "../../../gen/synapse/v1/a2n_pb.js";
import { GroupSchema, GroupStatus, PendingKind } from "../../../gen/synapse/v1/group_pb.js";
import type { GroupClient, GroupSendResult } from "../../client/group-client.js";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { agentAt, clientOptions, openGroupClient } from "../client.js";
import { describeGroup, describeGroupEvent, eventJson, roleLabel, sendJson } from "../group-output.js";
import { printJson, printLine } from "../output.js";
import { groupTask } from "./group-task.js";
import { counted } from "../../text/plural.js";

export const groupUsage = `usage: synapse group create   URL GROUP_ID [--name N] [--description D] [--endpoint URL] [--weight W]
       synapse group show     URL GROUP_ID
       synapse group list     URL [--page-size N]
       synapse group add      URL GROUP_ID (AGENT_ID --key-id KEY_ID | --agent-url URL) [--role coordinator|member|observer]
                                           [--weight W] [--note TEXT]
       synapse group add      URL GROUP_ID --approve REQUEST_ID [--role R] [--weight W]
       synapse group join     URL GROUP_ID [--accept | --invitation ID] [--endpoint URL] [--role R] [--note TEXT]
       synapse group role     URL GROUP_ID AGENT_ID --role coordinator|member|observer [--weight W] [--reason TEXT]
       synapse group leave    URL GROUP_ID [--reason TEXT]
       synapse group remove   URL GROUP_ID AGENT_ID [--reason TEXT]
       synapse group dissolve URL GROUP_ID [--reason TEXT]
       synapse group watch    URL GROUP_ID [--from SEQUENCE] [--follow]
       synapse group task     URL GROUP_ID ...            (synapse group task --help)
Every form takes --home DIR, --protocol P and --json.

URL is the group's host (an agent serving GroupService). Messages are signed
with the identity in --home (default SYNAPSE_HOME): pass an agent's data dir to
act as that agent. Nobody joins without signing: \`add\` invites an agent (the
invitation names its key) and the agent accepts with \`join --accept\` (which
signs a join naming the invitation addressed to it; or \`--invitation ID\`); or
the agent asks with \`join\` and a coordinator approves with \`add --approve\`.
--agent-url reads the agent's id and key from its GetCapabilities; \`add\` of an
agent that asked to join approves its request. The role a request asks for is
only a wish: an approval grants member unless --role names another role.
\`role\` gives a member another role (coordinators only). \`watch\`
prints the group's signed log (verified) up to now, or with --follow until the
group is dissolved. Exit status: 0 done, 1 refused or failed, 2 usage error.`;

const roles: Record<string, GroupRole> = { coordinator: GroupRole.COORDINATOR, member: GroupRole.MEMBER, observer: GroupRole.OBSERVER };

export function roleOption(value: string | undefined): GroupRole | undefined {
  if (value === undefined) return undefined;
  const role = roles[value.toLowerCase()];
  if (role === undefined) throw new UsageError(`--role must be coordinator, member or observer, got ${JSON.stringify(value)}`);
  return role;
}

const options = {
  ...clientOptions,
  name: { type: "string" },
  description: { type: "string" },
  endpoint: { type: "string" },
  weight: { type: "string" },
  "key-id": { type: "string" },
  "agent-url": { type: "string" },
  role: { type: "string" },
  note: { type: "string" },
  approve: { type: "string" },
  invitation: { type: "string" },
  accept: { type: "boolean" },
  reason: { type: "string" },
  from: { type: "string" },
  follow: { type: "boolean" },
  "page-size": { type: "string" },
} as const;

function report(result: GroupSendResult, json: boolean | undefined, hint?: string): number {
  if (json) printJson(sendJson(result));
  else {
    printLine(describeGroupEvent(result.reply));
    if (result.group) for (const line of describeGroup(result.group)) printLine(line);
    if (hint) printLine(hint);
  }
  return 0;
}

export async function group(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === "task") return groupTask(rest);
  if (sub === undefined || sub === "--help" || sub === "-h") {
    printLine(groupUsage);
    return sub === undefined ? 2 : 0;
  }
  const { values, positionals } = parse(rest, options, groupUsage);
  if (values.help) {
    printLine(groupUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", groupUsage);
  if (sub === "list") {
    const page = await (await openGroupClient(url, values)).listGroups(integerOption(values["page-size"], "--page-size") ?? 0);
    if (values.json) printJson({ groups: page.groups.map((g) => toJson(GroupSchema, g)), nextPageToken: page.nextPageToken });
    else if (page.groups.length === 0) printLine("no groups");
    else for (const g of page.groups) printLine(`${g.groupId}${g.name ? ` (${g.name})` : ""}: ${counted(g.members.length, "member")}, ${g.status === GroupStatus.DISSOLVED ? "dissolved" : "active"}`);
    return 0;
  }
  const groupId = requirePositional(positionals, 1, "GROUP_ID", groupUsage);
  const weight = integerOption(values.weight, "--weight");
  switch (sub) {
    case "create": {
      const client = await openGroupClient(url, values);
      return report(await client.create(groupId, { name: values.name, description: values.description, endpointUrl: values.endpoint, weight }), values.json);
    }
    case "show": {
      const shown = await (await openGroupClient(url, values)).getGroup(groupId);
      if (values.json) printJson({ group: toJson(GroupSchema, shown.group!), groupTaskIds: shown.groupTaskIds, voteIds: shown.voteIds });
      else {
        for (const line of describeGroup(shown.group!)) printLine(line);
        if (shown.groupTaskIds.length > 0) printLine(`group tasks: ${shown.groupTaskIds.join(", ")}`);
        if (shown.voteIds.length > 0) printLine(`votes: ${shown.voteIds.join(", ")}`);
      }
      return 0;
    }
    case "add": {
      const client = await openGroupClient(url, values);
      if (values.approve !== undefined) return approveRequest(client, url, groupId, values.approve, { weight, role: roleOption(values.role), json: values.json });
      let invitee: { agentId: string; keyId: string };
      if (values["agent-url"] !== undefined) invitee = await agentAt(values["agent-url"], values);
      else {
        const agentId = requirePositional(positionals, 2, "AGENT_ID (or --agent-url)", groupUsage);
        if (values["key-id"] === undefined) throw new UsageError(`--key-id is required with AGENT_ID: the key that must sign the acceptance\n\n${groupUsage}`);
        invitee = { agentId, keyId: values["key-id"] };
      }
      // An agent that asked to join is admitted by approving its request, with the role --role names (member when none).
      const role = roleOption(values.role);
      const request = (await client.getGroup(groupId)).group?.pending.find((entry) => entry.kind === PendingKind.JOIN_REQUEST && entry.agent?.agentId === invitee.agentId);
      if (request !== undefined) return approveRequest(client, url, groupId, request.messageId, { weight, role, json: values.json });
      const result = await client.invite(groupId, invitee, { role, weight, note: values.note });
      return report(result, values.json, `invited ${invitee.agentId}; it accepts with: synapse group join ${url} ${groupId} --accept --endpoint ITS_URL --home ITS_DATA_DIR (invitation ${result.reply.header.replyTo})`);
    }
    case "join": {
      const client = await openGroupClient(url, values);
      let invitationId = values.invitation;
      if (values.accept) {
        if (invitationId !== undefined) throw new UsageError(`--accept finds the invitation; give it or --invitation ID\n\n${groupUsage}`);
        // An invitee may read the group: the invitation addressed to this identity names the id to sign.
        const shown = (await client.getGroup(groupId)).group;
        const mine = shown?.pending.find((entry) => entry.kind === PendingKind.INVITATION && entry.agent?.agentId === client.agentId);
        if (mine === undefined) throw new Error(`no invitation for ${client.agentId} in group ${groupId}`);
        invitationId = mine.messageId;
      }
      const result = await client.join(groupId, { invitationId, endpointUrl: values.endpoint, role: roleOption(values.role), note: values.note });
      const asked = invitationId === undefined && !result.group?.members.some((m) => m.agent?.agentId === client.agentId);
      return report(result, values.json, asked ? `asked to join; a coordinator approves with: synapse group add ${url} ${groupId} --approve ${result.reply.header.replyTo}` : undefined);
    }
    case "role": {
      const agentId = requirePositional(positionals, 2, "AGENT_ID", groupUsage);
      const role = roleOption(values.role);
      if (role === undefined) throw new UsageError(`--role is required: the role AGENT_ID gets\n\n${groupUsage}`);
      return report(await (await openGroupClient(url, values)).setRole(groupId, agentId, role, { weight, reason: values.reason }), values.json);
    }
    case "leave":
      return report(await (await openGroupClient(url, values)).leave(groupId, values.reason), values.json);
    case "remove": {
      const agentId = requirePositional(positionals, 2, "AGENT_ID", groupUsage);
      return report(await (await openGroupClient(url, values)).remove(groupId, agentId, values.reason), values.json);
    }
    case "dissolve":
      return report(await (await openGroupClient(url, values)).dissolve(groupId, values.reason), values.json);
    case "watch":
      return watchGroup(url, groupId, values);
    default:
      throw new UsageError(`unknown group command ${JSON.stringify(sub)}\n\n${groupUsage}`);
  }
}

/**
 * Approves a join request with the role granted (member unless `role` says
 * otherwise), saying on stderr what the request wished for when it wished
 * for another role.
 */
async function approveRequest(
  client: GroupClient,
  url: string,
  groupId: string,
  requestId: string,
  options: { weight?: number; role?: GroupRole; json?: boolean },
): Promise<number> {
  const granted = options.role ?? GroupRole.MEMBER;
  const request = (await client.getGroup(groupId)).group?.pending.find((entry) => entry.kind === PendingKind.JOIN_REQUEST && entry.messageId === requestId);
  if (request !== undefined && request.role !== granted) {
    const who = request.agent?.agentId ?? "the agent";
    const more = options.role === undefined ? `; to grant it: pass --role ${roleLabel(request.role)}, or later: synapse group role ${url} ${groupId} ${who} --role ${roleLabel(request.role)}` : "";
    process.stderr.write(`${who} asked to join as ${roleLabel(request.role)}; granting ${roleLabel(granted)}${more}\n`);
  }
  return report(await client.approve(groupId, requestId, options.weight, granted), options.json);
}

async function watchGroup(url: string, groupId: string, values: { home?: string; protocol?: string; ca?: string; json?: boolean; from?: string; follow?: boolean }): Promise<number> {
  const client = await openGroupClient(url, values);
  const abort = new AbortController();
  let until = Number.MAX_SAFE_INTEGER;
  for await (const item of client.watch(groupId, { fromSequence: integerOption(values.from, "--from"), signal: abort.signal })) {
    if (item.kind === "snapshot") {
      if (!values.follow) until = Number(item.group.lastSequence);
      if (!values.follow && (integerOption(values.from, "--from") ?? 1) > until) break;
    } else if (item.kind === "event") {
      if (values.json) process.stdout.write(`${JSON.stringify({ kind: "event", ...(eventJson(item.event) as object) })}\n`);
      else printLine(describeGroupEvent(item.event));
      if (item.event.sequence >= until) break;
    } else if (item.kind === "reconnecting") {
      process.stderr.write(`connection lost (${item.error.message}); resuming from event ${item.fromSequence}\n`);
    }
  }
  abort.abort();
  return 0;
}
