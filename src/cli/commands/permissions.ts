// `synapse permissions grant|revoke|list`: the permissions a registry grants
// keys, which MatchCapabilities counts (granting takes a registry admin key).
import { toJson } from "@bufbuild/protobuf";
import { PermissionGrantSchema, type PermissionGrant } from "../../../gen/synapse/v1/registry_pb.js";
import { loadOrCreateIdentity } from "../../agent/identity.js";
import { parse, requirePositional, UsageError } from "../args.js";
import { clientOptions } from "../client.js";
import { synapseHome } from "../home.js";
import { printJson, printLine } from "../output.js";
import { registry, writeHeaders } from "./registry.js";

export const permissionsUsage = `usage: synapse permissions grant  REGISTRY_URL KEY_ID --permission P ... [--reason R]
       synapse permissions revoke REGISTRY_URL KEY_ID [--reason R]
       synapse permissions list   REGISTRY_URL [KEY_ID | --mine]

KEY_ID is the grantee's key id (43 characters, as \`synapse keygen\` prints), or "*"
for every authenticated caller; a key id that begins with "-" goes last, after "--"
(synapse permissions grant URL --permission P -- -Abc...). grant replaces what the key held; revoke removes
it. Both need a registry admin key (synapse serve --registry-admin) in SYNAPSE_HOME
and are audited (\`synapse audit\`). list is public; --mine shows your own key's.
Every form takes --json.`;

function describe(grant: PermissionGrant): string {
  return `${grant.keyId}  ${grant.permissions.join(", ") || "(none)"}${grant.reason ? `  (${grant.reason})` : ""}${grant.updatedBy ? `  by ${grant.updatedBy}` : ""}`;
}

export async function permissions(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  const { values, positionals } = parse(
    rest,
    { ...clientOptions, permission: { type: "string", multiple: true }, reason: { type: "string" }, mine: { type: "boolean" } },
    permissionsUsage,
  );
  if (values.help || verb === undefined || verb === "--help") {
    printLine(permissionsUsage);
    return verb === undefined ? 2 : 0;
  }
  const url = requirePositional(positionals, 0, "REGISTRY_URL", permissionsUsage);
  const client = registry(url, values);
  const show = (grants: PermissionGrant[]) => {
    if (values.json) printJson({ grants: grants.map((grant) => toJson(PermissionGrantSchema, grant)) });
    else for (const grant of grants) printLine(describe(grant));
  };
  switch (verb) {
    case "grant":
    case "revoke": {
      const keyId = requirePositional(positionals, 1, "KEY_ID", permissionsUsage);
      const granted = verb === "grant" ? (values.permission ?? []) : [];
      if (verb === "grant" && granted.length === 0) throw new UsageError(`give at least one --permission (revoke removes a grant)\n\n${permissionsUsage}`);
      const { grant } = await client.setPermissionGrant({ keyId, permissions: granted, reason: values.reason ?? "" }, { headers: await writeHeaders(url, values) });
      show([grant!]);
      return 0;
    }
    case "list": {
      const keyId = values.mine ? (await loadOrCreateIdentity(synapseHome(values.home), { agentName: "synapse command line" })).identity.key.keyId : (positionals[1] ?? "");
      const grants: PermissionGrant[] = [];
      let pageToken = "";
      do {
        const page = await client.listPermissionGrants({ keyId, pageToken });
        grants.push(...page.grants);
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      show(grants);
      if (grants.length === 0 && !values.json) printLine("no grants");
      return 0;
    }
    default:
      throw new UsageError(`unknown permissions command ${JSON.stringify(verb)}\n\n${permissionsUsage}`);
  }
}
