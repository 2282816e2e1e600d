// `synapse keygen`: create (or show) an agent identity in a directory.
import { access } from "node:fs/promises";
import { join } from "node:path";
import { KEY_FILE, loadOrCreateIdentity } from "../../agent/identity.js";
import { toBase64Url } from "../../crypto/encoding.js";
import { generateKey, saveKey } from "../../crypto/keys.js";
import { parse } from "../args.js";
import { synapseHome } from "../home.js";
import { printJson, printLine } from "../output.js";

export const keygenUsage = `usage: synapse keygen [--home DIR] [--agent-id ID] [--force] [--json]

Creates an Ed25519 agent identity (agent.key, mode 0600, and identity.json) in
DIR (default: SYNAPSE_HOME, or ~/.synapse) and prints its agent id and key id.
An existing identity is kept and shown; --force replaces its key (peers that
pinned the old key will refuse the new one until they are told of it).`;

export async function keygen(argv: string[]): Promise<number> {
  const { values } = parse(argv, { home: { type: "string" }, "agent-id": { type: "string" }, force: { type: "boolean" }, json: { type: "boolean" } }, keygenUsage);
  if (values.help) {
    printLine(keygenUsage);
    return 0;
  }
  const dir = synapseHome(values.home);
  const keyPath = join(dir, KEY_FILE);
  const exists = await access(keyPath).then(
    () => true,
    () => false,
  );
  if (exists && values.force) await saveKey(keyPath, generateKey());
  const { identity, created } = await loadOrCreateIdentity(dir, { agentId: values["agent-id"] });
  const result = {
    agentId: identity.agentId,
    keyId: identity.key.keyId,
    publicKey: toBase64Url(identity.key.publicKey),
    keyFile: keyPath,
    created: created || Boolean(values.force),
  };
  if (values.json) printJson(result);
  else {
    printLine(`${result.created ? "created" : "existing"} identity in ${dir}`);
    printLine(`agent id:   ${result.agentId}`);
    printLine(`key id:     ${result.keyId}`);
    printLine(`public key: ${result.publicKey} (raw Ed25519, base64url)`);
  }
  return 0;
}
